"""Who pays when a sandbox dies: the evidence decides, not the way it looked.

A sandbox that stops because of what ran in it is the workload's doing: the
run fails and stays charged. Only a platform fault (the engine or the host
lost, a container the platform removed) is refunded.
"""

import os
import signal
import subprocess

import pytest

from belvedir.sandbox.egress import KEEPER_USER
from belvedir.sandbox.models import SandboxHost
from belvedir.sandbox.owners import Owner
from billing.models import Account, LedgerEntry
from harnesses.actions import start_run
from harnesses.execution import execute_run
from harnesses.models import Run

from .concurrency import start_thread
from .harness_fixtures import fund, harness, make_repo, run_status, wait_for

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    # Every verdict here must hold under both runtimes a host may have (auto is runsc here; runc hosts are allowed).
    pytest.mark.parametrize("runtime", ["runc", "runsc"]),
]


@pytest.fixture(autouse=True)
def _runs_env(settings, runtime):
    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    settings.HARNESS_HEARTBEAT_SECONDS = 0.5
    settings.HARNESS_SANDBOX_NETWORK = "none"
    SandboxHost.objects.update_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL, "capacity": 4, "runtime": runtime})


@pytest.fixture
def funded(project):
    fund(project, 1000)
    return project


def run_to_end(h, owner) -> Run:
    run = start_run(h, owner)
    execute_run(run.pk)
    run.refresh_from_db()
    return run


def refunded(run) -> bool:
    return LedgerEntry.objects.filter(kind=LedgerEntry.Kind.REFUND, reference=f"run:{run.pk}").exists()


def docker_cli(*args):
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60)


def test_killing_the_sandboxs_own_init_does_not_make_a_run_free(tmp_path, owner, funded):
    # The reproduced attack. Whether the kill succeeds (PID 1 under the
    # workload's uid) or not (PID 1 out of its reach), the run is charged.
    make_repo(tmp_path / "repo", {"run.py": "import os\nos.system('pkill -x sleep; kill -TERM 1; kill -9 1; sleep 5')\nraise SystemExit(3)\n"})
    h = harness(funded, owner, tmp_path / "repo")

    run = run_to_end(h, owner)

    assert run.status == "failed", (run.status, run.status_message)
    assert not refunded(run)
    assert Account.balance_for(funded) == 1000 - run.price_cents
    assert "refunded" not in run.status_message


def test_a_sandbox_that_stops_while_the_engine_is_healthy_fails_charged_with_a_reason(tmp_path, owner, funded):
    make_repo(tmp_path / "repo", {"run.py": "import time\ntime.sleep(60)\n"})
    h = harness(funded, owner, tmp_path / "repo")
    run = start_run(h, owner)
    worker = start_thread(execute_run, run.pk)
    wait_for(lambda: run_status(run) == "running")
    # The sandbox's PID 1 ends without any request to the engine, which stays
    # up: what a workload that reached it would do (signalled here from the
    # host, whatever uid the init runs as).
    name = Owner("run", run.pk).container_name
    # What an init that fails says on its way out (tini's fatal errors go to its stderr) reaches the reason: said here
    # on its stderr by its own uid, which only the platform's execs have.
    said = docker_cli("exec", "-u", KEEPER_USER, name, "sh", "-c", "echo '[FATAL tini (1)] Error while waiting for pids' > /proc/1/fd/2")
    assert said.returncode == 0, said.stderr
    init_pid = docker_cli("inspect", "-f", "{{.State.Pid}}", name).stdout.strip()
    os.kill(int(init_pid), signal.SIGKILL)
    worker.join(60)
    run.refresh_from_db()

    assert run.status == "failed", (run.status, run.status_message)
    assert "stopped from inside" in run.status_message
    assert "Its last words: [FATAL tini (1)] Error while waiting for pids" in run.status_message
    assert not refunded(run)


def test_a_run_that_exhausts_its_pids_is_charged(tmp_path, owner, funded, settings):
    settings.SANDBOX_PIDS = 48
    # Children outlive the run command and take every pid freed, while the
    # platform still has to read results.json and stop the sandbox.
    hog = (
        "import os, time\n"
        "if os.fork():\n"
        "    time.sleep(3); raise SystemExit(0)\n"
        "os.setsid()\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        time.sleep(0.001)\n"
    )
    make_repo(tmp_path / "repo", {"run.py": hog})
    h = harness(funded, owner, tmp_path / "repo")

    run = run_to_end(h, owner)

    assert run.status in ("succeeded", "failed"), (run.status, run.status_message)
    assert not refunded(run)
    assert Account.balance_for(funded) == 1000 - run.price_cents


def test_a_run_past_its_time_limit_is_timed_out_and_stays_charged(tmp_path, owner, funded):
    make_repo(tmp_path / "repo", {"run.py": "import time\ntime.sleep(600)\n"})
    # Set directly, under the form's 10 s minimum: the verdict, not the wait, is under test.
    h = harness(funded, owner, tmp_path / "repo", time_limit_seconds=3)

    run = run_to_end(h, owner)

    assert run.status == "timed_out", (run.status, run.status_message)
    assert not refunded(run)
    assert Account.balance_for(funded) == 1000 - run.price_cents


def test_a_run_out_of_memory_fails_and_stays_charged(tmp_path, owner, funded, settings):
    settings.SANDBOX_MEMORY_MB = 64
    make_repo(tmp_path / "repo", {"run.py": "x = bytearray(512 * 1024 * 1024)\n"})
    h = harness(funded, owner, tmp_path / "repo")

    run = run_to_end(h, owner)

    assert run.status == "failed" and "out of memory" in run.status_message, (run.status, run.status_message)
    assert not refunded(run)
    assert Account.balance_for(funded) == 1000 - run.price_cents


def test_a_sandbox_the_engine_was_told_to_remove_mid_run_is_refunded(tmp_path, owner, funded):
    # The evidence of a platform fault: the engine recorded a kill request
    # (an operator, a reaper, a daemon shutdown), which nothing inside the
    # sandbox can send.
    make_repo(tmp_path / "repo", {"run.py": "import time\ntime.sleep(60)\n"})
    h = harness(funded, owner, tmp_path / "repo")
    run = start_run(h, owner)
    worker = start_thread(execute_run, run.pk)
    wait_for(lambda: run_status(run) == "running")
    assert docker_cli("rm", "-f", Owner("run", run.pk).container_name).returncode == 0
    worker.join(60)
    run.refresh_from_db()

    assert run.status == "error", (run.status, run.status_message)
    assert refunded(run)
    assert Account.balance_for(funded) == 1000
