"""The Docker backend's own ways of keeping the contract (tests/test_backend_contract.py), against the real engine (never skipped).

What every backend must do is in the contract suite; these read what the
engine was asked for (HostConfig, cgroups) and the races that only Docker
and gVisor have.
"""

import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from belvedir.sandbox.backends import docker_engine
from belvedir.sandbox.backends.docker_sandbox import DockerSandbox
from belvedir.sandbox.egress import KEEPER_USER
from belvedir.sandbox.errors import DockerUnavailable, ImageMissing, SandboxOutOfMemory, SandboxPlatformError
from belvedir.sandbox.owners import Owner
from belvedir.sandbox.spec import Limits, SandboxSpec

from .harness_fixtures import wait_for

pytestmark = pytest.mark.docker
runtimes = pytest.mark.parametrize("runtime", ["runc", "runsc"])


def spec(name="t", **kwargs):
    return SandboxSpec(owner=Owner("test", name), **kwargs)


def test_gvisor_sandboxes_running_out_of_memory_at_once_each_report_it(docker_url):
    """gVisor only: the race is runsc's (runc's exec never ends before the engine sees the OOM kill).

    Under gVisor the whole sandbox dies, and runsc may end the exec (exit 128) before the
    engine sees the container stop: that must still read as out of memory, not as the
    command's own exit code. Three at once made it happen about one time in four."""

    def run_out(i):
        with DockerSandbox(spec(name=f"oom{i}", limits=Limits.defaults(memory_mb=64), runtime="runsc"), docker_url) as box:
            try:
                result = box.exec("python3 -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'", timeout=60)
            except SandboxOutOfMemory as exc:
                return exc.message
            return f"returned exit code {result.exit_code}: {result.output[-200:]}"

    with ThreadPoolExecutor(3) as pool:
        outcomes = list(pool.map(run_out, range(9)))
    assert all("out of memory (limit 64 MB)" in outcome for outcome in outcomes), outcomes


def test_under_runc_the_pids_cgroup_holds_the_limit_and_refuses_a_bombs_forks(docker_url):
    def cgroup(name: str) -> str:
        # cat as the exec's own process (no shell that would need to fork); cgroup v2's path, then v1's.
        for path in (f"/sys/fs/cgroup/{name}", f"/sys/fs/cgroup/pids/{name}"):
            result = box.exec(["cat", path], timeout=30)
            if result.exit_code == 0:
                return result.output.strip()
        return ""

    def refused() -> bool:
        count = box.exec(["grep", "-c", "Cannot fork", "/tmp/bomb.err"], user=KEEPER_USER, timeout=30).output.strip()
        return count.isdigit() and int(count) > 0

    with DockerSandbox(spec(limits=Limits.defaults(pids=64), runtime="runc"), docker_url) as box:
        # The limit the engine enforces is the one asked for, read two ways.
        assert box.container.attrs["HostConfig"]["PidsLimit"] == 64 and cgroup("pids.max") == "64"
        assert box.exec("(bomb() { bomb | bomb & }; bomb) >/dev/null 2>/tmp/bomb.err &", timeout=30).exit_code == 0
        wait_for(refused, timeout=30)
        # The cgroup saw the refusals too, and never held more than the limit, give or take
        # the processes `docker exec` attaches from outside (this test's own execs and their
        # runc init): pids.max refuses forks, not attaches.
        assert int(cgroup("pids.events").split()[-1]) > 0
        assert int(cgroup("pids.peak") or cgroup("pids.current")) <= 64 + 8
        assert subprocess.run(["python3", "-c", "print(1)"], capture_output=True, timeout=20).stdout == b"1\n"


def test_under_gvisor_the_process_limit_is_a_per_uid_rlimit(docker_url):
    """runsc's cgroup counts the gVisor kernel's host threads, not the sandbox's processes (docker_sandbox._process_limits)."""
    with DockerSandbox(spec(limits=Limits.defaults(pids=64), runtime="runsc"), docker_url) as box:
        host = box.container.attrs["HostConfig"]
    assert {"Name": "nproc", "Soft": 64, "Hard": 64} in host["Ulimits"]
    assert host["PidsLimit"] >= 16384


def test_it_names_a_missing_image_and_how_to_build_it(docker_url):
    with pytest.raises(ImageMissing, match="build_sandbox_image"):
        with DockerSandbox(spec(image="belvedir-no-such-image:latest"), docker_url):
            pass


def test_an_unreachable_engine_is_docker_unavailable():
    with pytest.raises(DockerUnavailable, match="unreachable"):
        with DockerSandbox(spec(), "unix:///tmp/no-docker-here.sock"):
            pass


@runtimes
def test_a_cpu_limit_past_the_hosts_cores_means_all_of_them(docker_url, runtime):
    # Docker refuses such a limit outright; an eval's scoring asks a core per slot, more than this host has.
    cores = docker_engine.engine_cpus(docker_url)
    assert cores >= 1
    with DockerSandbox(spec(limits=Limits.defaults(cpus=cores + 14), runtime=runtime), docker_url) as box:
        box.container.reload()
        assert box.container.attrs["HostConfig"]["NanoCpus"] == cores * 10**9
        assert box.exec("true", timeout=30).exit_code == 0
    with DockerSandbox(spec(limits=Limits.defaults(cpus=0.5), runtime=runtime), docker_url) as box:
        box.container.reload()
        assert box.container.attrs["HostConfig"]["NanoCpus"] == 5 * 10**8


@runtimes
def test_a_command_that_ends_after_the_platform_killed_its_sandbox_is_the_platforms_doing(docker_url, runtime):
    """A cancel's race made certain: the command ends killed (137) while the engine still shows the container running.

    Under gVisor the exec of a killed sandbox can end before the engine sees the container stop, and the
    contract test of a cancel read it once as the command's own exit code. kill() records that it killed first.
    """
    with DockerSandbox(spec(runtime=runtime), docker_url) as box:
        box._killed = True  # as kill() records it, a moment before the engine acts
        with pytest.raises(SandboxPlatformError, match="stopped by the platform during a command"):
            box.exec("kill -9 $$", timeout=30)


def test_a_sandbox_image_made_from_another_package_list_is_rebuilt_not_kept_for_its_tag(settings):
    from io import StringIO

    from django.core.management import call_command

    from .harness_fixtures import remove_image

    # The current image's root filesystem without the finishing Dockerfile's label: what an older checkout left.
    base = next(tag for image in docker_engine.connect(settings.SANDBOX_DOCKER_URL).images.list("belvedir-sandbox-base") for tag in image.tags)
    subprocess.run(["docker", "tag", base, "belvedir-sandbox:stale-test"], check=True)
    try:
        out = StringIO()
        call_command("build_sandbox_image", tag="belvedir-sandbox:stale-test", stdout=out)
        assert "was made from another package list or Dockerfile; rebuilding it" in out.getvalue()
        assert docker_engine.image_labels(settings.SANDBOX_DOCKER_URL, "belvedir-sandbox:stale-test") == docker_engine.image_labels(
            settings.SANDBOX_DOCKER_URL, settings.SANDBOX_IMAGE
        )
        again = StringIO()
        call_command("build_sandbox_image", tag="belvedir-sandbox:stale-test", stdout=again)
        assert "already exists" in again.getvalue()
    finally:
        remove_image("belvedir-sandbox:stale-test")


def test_a_removal_that_outlasts_one_engine_call_is_waited_for_not_left_behind(docker_url, monkeypatch):
    """A gVisor sandbox full of processes took longer than one call's timeout to remove on a loaded machine: the call
    timed out while the engine went on, and the container was left for the reaper. Here the first call times out
    as the engine starts the real removal; the sandbox asks again (a 409 while it is under way) until it is gone."""
    with DockerSandbox(spec(runtime="runsc"), docker_url) as box:
        name, container, calls = box.spec.name, box.container, []
        real_remove = container.remove

        def slow(**kwargs):
            calls.append(kwargs)
            if len(calls) == 1:
                ThreadPoolExecutor(1).submit(real_remove, **kwargs)
                raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=60)")
            return real_remove(**kwargs)

        monkeypatch.setattr(container, "remove", slow)
    assert len(calls) >= 2 and all(call == {"force": True} for call in calls)
    assert name not in {sandbox.name for sandbox in docker_engine.managed_containers(docker_url)}
