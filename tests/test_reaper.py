"""The sandbox reaper: what a dead worker left (a lease, a container) goes, for runs and evals alike."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from django_q.models import Schedule

from belvedir.sandbox import backends, scheduler
from belvedir.sandbox.backend import Sandbox, concurrency_per_sandbox
from belvedir.sandbox.models import SandboxHost, SandboxLease
from belvedir.sandbox.owners import Owner
from belvedir.sandbox.reaper import reap
from evals.actions import create_eval
from evals.benchmarks import humaneval
from evals.code_sandbox import code_sandbox_spec
from evals.models import Deployment, Eval

from .fakes.openai_server import FakeOpenAI

# The fake model servers listen on loopback, which production refuses (the suite's default).
pytestmark = pytest.mark.usefixtures("loopback_deployments")

CANONICAL = {row["input"]: row["reference"] for row in humaneval.rows()}


def test_owners_read_back_from_the_lease_column():
    owner = Owner("eval", 12)
    assert (str(owner), owner.id, owner.container_name) == ("eval:12", "12", f"bv-{settings.SANDBOX_INSTANCE}-eval-12")
    assert Owner.parse("eval:12") == owner
    with pytest.raises(ValueError):
        Owner.parse("eval12")


def test_two_installations_on_one_engine_name_the_same_owners_containers_apart(settings):
    # A sandbox removes a stale container of its own name on entry: with the
    # same name, one platform's run 5 would remove the other's.
    settings.SANDBOX_INSTANCE = "staging"
    staging = Owner("run", 5).container_name
    settings.SANDBOX_INSTANCE = "prod env/1"  # BELVEDIR_INSTANCE is free text; Docker names are not
    production = Owner("run", 5).container_name
    assert staging == "bv-staging-run-5"
    assert production != staging and production.startswith("bv-") and production.endswith("-run-5")
    assert all(c.isalnum() or c in "_.-" for c in production)


@pytest.mark.django_db
def test_one_schedule_reaps_every_kind_of_workload():
    schedule = Schedule.objects.get(name="reap sandbox workloads")
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == ("belvedir.sandbox.reaper.reap", "I", 1)
    assert not Schedule.objects.filter(name__in=["reap harness runs", "resume stale evals"]).exists()


def local_host():
    # A transactional test before this one may have flushed the migrated host away.
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL, "capacity": 4})


def an_eval(project, owner, status) -> Eval:
    local_host()
    deployment = Deployment.objects.create(project=project, name=f"d-{status}", base_url="http://127.0.0.1:9/v1", model="m")
    ev = create_eval(project, owner, deployment=deployment, benchmark="humaneval", sample_limit=2)
    Eval.objects.filter(pk=ev.pk).update(status=status, heartbeat_at=timezone.now())
    return ev


def held_sandbox(ev) -> Sandbox:
    """What a worker killed mid-eval leaves: its lease and its running sandbox."""
    lease = scheduler.acquire_host(ev.owner)
    return backends.for_host(lease.host).sandbox(code_sandbox_spec(ev.owner, slots=1)).__enter__()


def local_backend():
    return backends.for_host(SandboxHost.objects.get(name="local"))


@pytest.mark.sandbox
@pytest.mark.django_db
@pytest.mark.parametrize("status", ["failed", "cancelled", "error"])
def test_an_ended_evals_lease_and_container_are_reaped(project, owner, status):
    ev = an_eval(project, owner, status)
    box = held_sandbox(ev)
    try:
        assert [s.name for s in local_backend().managed("eval")] == [Owner("eval", ev.pk).container_name]
        outcome = reap()
        assert (outcome["leases_released"], outcome["orphans_removed"]) == (1, 1)
        assert not SandboxLease.objects.exists()
        assert local_backend().managed("eval") == []
    finally:
        box.__exit__(None, None, None)


@pytest.mark.sandbox
@pytest.mark.django_db
@pytest.mark.parametrize("status", ["running", "queued"])
def test_an_active_evals_lease_and_container_are_kept(project, owner, status):
    ev = an_eval(project, owner, status)
    box = held_sandbox(ev)
    try:
        outcome = reap()
        assert (outcome["leases_released"], outcome["orphans_removed"]) == (0, 0)
        assert list(SandboxLease.objects.values_list("owner", flat=True)) == [f"eval:{ev.pk}"]
        assert box.exec(["true"], timeout=30).exit_code == 0  # still there, still working
    finally:
        box.__exit__(None, None, None)
        scheduler.release(ev.owner)


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_an_eval_whose_worker_was_killed_ends_and_its_lease_and_container_are_reaped(project, owner, docker_backend, settings, subprocess_env):
    """As for a run: a SIGKILLed worker cleans nothing up; the reaper ends the eval (no resumes left) and frees what it held."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from .harness_fixtures import wait_for

    local_host()
    # Under gVisor an eval scores in a container per slot (concurrency_per_sandbox): all of them must go.
    runtime = docker_backend.runtime("auto")
    containers = settings.HUMANEVAL_SLOTS // concurrency_per_sandbox(runtime, settings.HUMANEVAL_SLOTS)
    assert (runtime, containers) == ("runsc", 4)
    with FakeOpenAI(answer=lambda prompt: CANONICAL[prompt], latency=5) as fake:
        deployment = Deployment.objects.create(project=project, name="slow", base_url=fake.url, model="oracle")
        ev = create_eval(project, owner, deployment=deployment, benchmark="humaneval", sample_limit=20)
        env = {**subprocess_env, "BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS": "1"}
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-c", f"from evals.tasks import run_eval; run_eval({ev.pk})"], env=env, start_new_session=True
        )
        name = Owner("eval", ev.pk).container_name
        try:
            expected = sorted([name] + [f"{name}-{part}" for part in range(1, containers)])
            wait_for(lambda: sorted(s.name for s in docker_backend.managed("eval")) == expected, timeout=90)
            wait_for(lambda: fake.requests, timeout=30)  # scoring under way
        finally:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    assert Eval.objects.get(pk=ev.pk).status == "running"
    assert list(SandboxLease.objects.values_list("owner", flat=True)) == [f"eval:{ev.pk}"]

    # Its heartbeat is fresh: the reaper leaves a running eval alone.
    assert reap() == {"reaped": {"run": 0, "eval": 0, "trial": 0, "grade": 0}, "leases_released": 0, "orphans_removed": 0}
    assert SandboxLease.objects.exists() and docker_backend.managed("eval")

    settings.EVAL_STALE_SECONDS = 1
    settings.EVAL_MAX_AUTO_RESUMES = 0
    time.sleep(1.5)
    outcome = reap()
    ev.refresh_from_db()
    assert ev.status == "error" and "worker stopped" in ev.status_message
    assert (outcome["leases_released"], outcome["orphans_removed"]) == (1, containers)
    assert not SandboxLease.objects.exists()
    assert docker_backend.managed("eval") == []


@pytest.mark.django_db
def test_a_trial_still_running_past_its_deadline_has_lost_its_worker_and_errors_to_retry(project, owner):
    from agent_tasks.actions import import_task_set
    from agent_tasks.models import Trial
    from belvedir.sandbox import owners

    files = {"task.toml": b'version = "1.0"\n', "instruction.md": b"Do it.\n", "tests/test.sh": b"exit 0\n", "environment/Dockerfile": b"FROM x\n"}
    task = import_task_set(project, owner, "t", files, single_name="t")[0].tasks.get()
    lost = Trial.objects.create(task=task, agent="nop", deadline_at=timezone.now() - timedelta(seconds=1))
    alive = Trial.objects.create(task=task, agent="nop", deadline_at=timezone.now() + timedelta(hours=1))
    kind = owners.get("trial")
    assert owners.active_ids(kind, [lost.pk, alive.pk]) == {str(lost.pk), str(alive.pk)}
    assert kind.reap_stale() == 1
    lost.refresh_from_db()
    assert (lost.status, lost.reward, lost.platform_fault) == ("errored", None, True)
    assert lost.error == "The worker running this trial stopped; it was refunded. Retry it."
    assert owners.active_ids(kind, [lost.pk, alive.pk]) == {str(alive.pk)}
