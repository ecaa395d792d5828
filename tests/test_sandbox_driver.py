"""The sandbox driver against the real Docker engine (never skipped)."""

import socket
import subprocess
import time

import pytest

from belvedir.sandbox.backends import docker_engine as sandbox_docker
from belvedir.sandbox.backends.docker_sandbox import DockerSandbox as Sandbox
from belvedir.sandbox.egress import KEEPER_USER
from belvedir.sandbox.errors import (
    DockerUnavailable,
    ImageMissing,
    SandboxFileMissing,
    SandboxFileTooLarge,
    SandboxOutOfMemory,
    SandboxTimeout,
)
from belvedir.sandbox.owners import Owner
from belvedir.sandbox.spec import Limits, SandboxSpec

from .harness_fixtures import wait_for

pytestmark = pytest.mark.docker
# Limits, lockdown and isolation hold under both runtimes the platform uses.
runtimes = pytest.mark.parametrize("runtime", ["runc", "runsc"])


def spec(name="t", **kwargs):
    return SandboxSpec(owner=Owner("test", name), **kwargs)


@runtimes
def test_it_reports_exit_codes_and_output(docker_url, runtime):
    with Sandbox(spec(runtime=runtime), docker_url) as box:
        ok = box.exec("echo hello; echo oops >&2", timeout=30)
        assert ok.exit_code == 0
        assert "hello" in ok.output and "oops" in ok.output
        assert box.exec("exit 7", timeout=30).exit_code == 7


@runtimes
def test_it_passes_env_to_the_command(docker_url, runtime):
    with Sandbox(spec(runtime=runtime), docker_url) as box:
        result = box.exec('printf "%s" "$SECRET_TOKEN"', env={"SECRET_TOKEN": "s3cr3t"}, timeout=30)
    assert result.output == "s3cr3t"


@runtimes
def test_it_kills_a_command_past_its_deadline(docker_url, runtime):
    started = time.monotonic()
    with Sandbox(spec(runtime=runtime), docker_url) as box:
        with pytest.raises(SandboxTimeout) as caught:
            box.exec("echo started; sleep 600", timeout=2)
    assert time.monotonic() - started < 30
    assert "started" in caught.value.output
    assert "2 s" in caught.value.message


@runtimes
def test_it_reports_out_of_memory(docker_url, runtime):
    with Sandbox(spec(limits=Limits.defaults(memory_mb=64), runtime=runtime), docker_url) as box:
        with pytest.raises(SandboxOutOfMemory, match="64 MB"):
            box.exec("python3 -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'", timeout=60)


def test_gvisor_sandboxes_running_out_of_memory_at_once_each_report_it(docker_url):
    """gVisor only: the race is runsc's (runc's exec never ends before the engine sees the OOM kill).

    Under gVisor the whole sandbox dies, and runsc may end the exec (exit 128) before the
    engine sees the container stop: that must still read as out of memory, not as the
    command's own exit code. Three at once made it happen about one time in four."""
    from concurrent.futures import ThreadPoolExecutor

    def run_out(i):
        with Sandbox(spec(name=f"oom{i}", limits=Limits.defaults(memory_mb=64), runtime="runsc"), docker_url) as box:
            try:
                result = box.exec("python3 -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'", timeout=60)
            except SandboxOutOfMemory as exc:
                return exc.message
            return f"returned exit code {result.exit_code}: {result.output[-200:]}"

    with ThreadPoolExecutor(3) as pool:
        outcomes = list(pool.map(run_out, range(9)))
    assert all("out of memory (limit 64 MB)" in outcome for outcome in outcomes), outcomes


@runtimes
def test_it_contains_a_fork_bomb_while_the_host_stays_responsive(docker_url, runtime):
    def cgroup(name: str) -> str:
        # cat as the exec's own process (no shell that would need to fork);
        # cgroup v2's path, then v1's.
        for path in (f"/sys/fs/cgroup/{name}", f"/sys/fs/cgroup/pids/{name}"):
            result = box.exec(["cat", path], timeout=30)
            if result.exit_code == 0:
                return result.output.strip()
        return ""

    with Sandbox(spec(limits=Limits.defaults(pids=64), runtime=runtime), docker_url) as box:
        host = box.container.attrs["HostConfig"]
        if runtime == "runc":
            # The limit the engine enforces is the one asked for, read two ways.
            assert host["PidsLimit"] == 64 and cgroup("pids.max") == "64"
        else:
            # gVisor: the sandbox's own processes are capped per uid (see _process_limits).
            assert {"Name": "nproc", "Soft": 64, "Hard": 64} in host["Ulimits"]
        # The bomb runs in the background so this exec returns; it is bounded
        # by the limit and killed with the sandbox. Its refused forks are the
        # proof it reached the limit: one that never got there proves nothing.
        assert box.exec("(bomb() { bomb | bomb & }; bomb) >/dev/null 2>/tmp/bomb.err &", timeout=30).exit_code == 0

        # Asked as the keeper's uid, and as the exec's own process (no shell that would need
        # to fork): the workload's limit does not bind it (under gVisor a process of the
        # workload's uid could not even start while the bomb holds them all).
        def refused() -> bool:
            count = box.exec(["grep", "-c", "Cannot fork", "/tmp/bomb.err"], user=KEEPER_USER, timeout=30).output.strip()
            return count.isdigit() and int(count) > 0  # not yet: 0, or no file yet

        wait_for(refused, timeout=30)
        assert box.exec(["echo", "survived"], user=KEEPER_USER, timeout=30).output == "survived\n"
        held = box.exec(["ps", "-u", "1000", "--no-headers", "-o", "pid"], user=KEEPER_USER, timeout=30)
        assert held.exit_code in (0, 1) and len(held.output.split()) <= 64, held.output
        if runtime == "runc":
            # The cgroup saw the refusals too, and never held more than the limit, give or take
            # the processes `docker exec` attaches from outside (this test's own execs and their
            # runc init): pids.max refuses forks, not attaches.
            assert int(cgroup("pids.events").split()[-1]) > 0
            assert int(cgroup("pids.peak") or cgroup("pids.current")) <= 64 + 8
        # The host still forks quickly while the bomb is held at the limit.
        started = time.monotonic()
        for _ in range(20):
            subprocess.run(["true"], check=True)
        assert time.monotonic() - started < 5
        assert subprocess.run(["python3", "-c", "print(1)"], capture_output=True, timeout=20).stdout == b"1\n"


@runtimes
def test_network_none_cannot_reach_the_host(docker_url, runtime):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        with Sandbox(spec(network="none", runtime=runtime), docker_url) as box:
            script = (
                "import socket\n"
                "try:\n"
                f"    socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')\n"
                "except OSError as e:\n"
                "    print('REFUSED', e)\n"
            )
            result = box.exec(["python3", "-c", script], timeout=30)
    finally:
        listener.close()
    assert "REFUSED" in result.output
    assert "CONNECTED" not in result.output


@runtimes
def test_it_runs_unprivileged_and_locked_down(docker_url, runtime):
    with Sandbox(spec(runtime=runtime), docker_url) as box:
        assert box.runtime == runtime
        ids = box.exec("id -u; id -g", timeout=30).output.split()
        status = box.exec("grep -E '^(CapEff|NoNewPrivs)' /proc/self/status", timeout=30).output
        docker_sock = box.exec("test -e /var/run/docker.sock && echo present || echo absent", timeout=30).output
        readonly = box.exec("touch /usr/evil 2>&1 || echo denied", timeout=30).output
    assert ids == ["1000", "1000"]
    assert "CapEff:\t0000000000000000" in status
    if runtime == "runc":  # gVisor's /proc does not report the flag (its kernel enforces it all the same)
        assert "NoNewPrivs:\t1" in status
    assert docker_sock.strip() == "absent"
    assert "denied" in readonly


@runtimes
def test_disk_writes_are_bounded_by_the_sandbox_not_the_host(docker_url, runtime):
    with Sandbox(spec(limits=Limits.defaults(memory_mb=256, home_mb=32), runtime=runtime), docker_url) as box:
        result = box.exec("dd if=/dev/zero of=$HOME/fill bs=1M count=200 2>&1; echo exit=$?", timeout=60)
    assert "No space left on device" in result.output


@runtimes
def test_it_places_and_reads_back_files(docker_url, runtime):
    with Sandbox(spec(runtime=runtime), docker_url) as box:
        box.put_files("/home/sandbox/work", {"tasks.txt": b"task one\n", "sub/dir.txt": b"x"})
        assert box.exec("cat work/tasks.txt; python3 -c \"import os; print(os.stat('work/tasks.txt').st_uid)\"", timeout=30).output == "task one\n1000\n"
        box.exec("echo '{\"score\": 1}' > results.json", timeout=30)
        assert box.read_file("/home/sandbox/results.json", 1024) == b'{"score": 1}\n'
        with pytest.raises(SandboxFileMissing):
            box.read_file("/home/sandbox/nope.json", 1024)
        box.exec("head -c 2048 /dev/zero > big", timeout=30)
        with pytest.raises(SandboxFileTooLarge):
            box.read_file("/home/sandbox/big", 1024)


@runtimes
def test_it_keeps_only_the_tail_of_a_flood(docker_url, runtime):
    with Sandbox(spec(runtime=runtime), docker_url) as box:
        result = box.exec("head -c 50000000 /dev/zero | tr '\\0' 'x'; echo; echo THE-END", timeout=60, tail_bytes=1000)
    assert len(result.output.encode()) <= 1000
    assert result.output.rstrip().endswith("THE-END")


def test_it_names_a_missing_image(docker_url):
    with pytest.raises(ImageMissing, match="build_sandbox_image"):
        with Sandbox(spec(image="belvedir-no-such-image:latest"), docker_url):
            pass


def test_it_names_an_unreachable_engine():
    with pytest.raises(DockerUnavailable, match="unreachable"):
        with Sandbox(spec(), "unix:///tmp/no-docker-here.sock"):
            pass


# Names and labels are the engine's, the same whichever runtime: these take runc, the cheaper to start.


def test_it_replaces_a_stale_container_of_the_same_name(docker_url):
    first = Sandbox(spec("stale", runtime="runc"), docker_url).__enter__()
    first.client.close()
    first.client = None  # simulate a worker that died without cleaning up
    with Sandbox(spec("stale", runtime="runc"), docker_url) as box:
        assert box.exec("echo fresh", timeout=30).output == "fresh\n"
    assert not [c for c in sandbox_docker.managed_containers(docker_url) if c.name == Owner("test", "stale").container_name]


@runtimes
def test_a_cpu_limit_past_the_hosts_cores_means_all_of_them(docker_url, runtime):
    # Docker refuses such a limit outright; an eval's scoring asks a core per slot, more than this host has.
    cores = sandbox_docker.engine_cpus(docker_url)
    assert cores >= 1
    with Sandbox(spec(limits=Limits.defaults(cpus=cores + 14), runtime=runtime), docker_url) as box:
        box.container.reload()
        assert box.container.attrs["HostConfig"]["NanoCpus"] == cores * 10**9
        assert box.exec("true", timeout=30).exit_code == 0
    with Sandbox(spec(limits=Limits.defaults(cpus=0.5), runtime=runtime), docker_url) as box:
        box.container.reload()
        assert box.container.attrs["HostConfig"]["NanoCpus"] == 5 * 10**8


def test_it_labels_its_containers_for_the_reaper(docker_url):
    with Sandbox(spec("labelled", runtime="runc"), docker_url):
        found = [c for c in sandbox_docker.managed_containers(docker_url, "test") if c.name == Owner("test", "labelled").container_name]
    assert found and found[0].owner_id == "labelled"


def test_another_installations_containers_are_not_ours(docker_url, settings):
    with Sandbox(spec("mine", runtime="runc"), docker_url):
        assert [c.name for c in sandbox_docker.managed_containers(docker_url)] == [Owner("test", "mine").container_name]
        settings.SANDBOX_INSTANCE = "another-platform"
        assert sandbox_docker.managed_containers(docker_url) == []
