"""Sandbox host health checks (the schedule, `manage.py check_hosts`, the admin) against the real main engine."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_q.models import Schedule

from belvedir.sandbox import health, scheduler
from belvedir.sandbox.errors import NoCapacity
from belvedir.sandbox.models import SandboxHost, SandboxLease
from belvedir.sandbox.output import MASK
from belvedir.sandbox.owners import Owner
from billing import workloads
from billing.models import LedgerEntry
from harnesses.actions import RUNS
from harnesses.models import Harness, Run

from .harness_fixtures import fund

pytestmark = pytest.mark.django_db

# A Docker engine that does not answer: no engine is needed to prove that, so this runs in the fast tier too.
SILENT = "unix:///tmp/bv-no-engine-here.sock"
PEM_KEY = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END PRIVATE KEY-----\n"


@pytest.fixture(autouse=True)
def local_host(db, settings):
    """The `local` host a migration makes: a transactional test run before this module in the same worker empties
    every table, that row's too (seen with other real-part modules before it on one worker)."""
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL})


@pytest.fixture(autouse=True)
def _no_wait_before_the_retry(monkeypatch):
    # The retry still happens (a silent engine is asked twice); only the second between goes.
    monkeypatch.setattr(health, "RETRY_SECONDS", 0)


@pytest.fixture
def silent_host(settings):
    settings.SANDBOX_HEALTH_TIMEOUT_SECONDS = 1
    return SandboxHost.objects.create(name="silent", backend="docker", url=SILENT, capacity=4)


def running_run(project, owner, host) -> Run:
    """A run in its sandbox on `host`, charged, holding its lease, whose worker nobody watches."""
    fund(project)
    harness = Harness.objects.create(project=project, created_by=owner, name="h", repo_url="https://example.com/r.git", run_command="true")
    run = Run.objects.create(project=project, harness=harness, created_by=owner, price_cents=harness.price_cents, status="running", host=host)
    workloads.charge(RUNS, run, run.price_cents, memo="run")
    SandboxLease.objects.create(host=host, owner=str(run.owner))
    return run


def test_it_is_scheduled_every_minute():
    schedule = Schedule.objects.get(name="check sandbox hosts")
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == ("belvedir.sandbox.health.check_hosts", "I", 1)


def test_a_silent_host_is_marked_unhealthy_and_takes_no_new_runs(silent_host):
    SandboxHost.objects.filter(name="local").update(capacity=1)
    assert health.check_hosts() == {"healthy": ["local"], "unhealthy": ["silent"]}
    silent_host.refresh_from_db()
    assert not silent_host.healthy and "unreachable" in silent_host.last_error and silent_host.last_checked_at
    assert scheduler.acquire_host(Owner("run", 1)).host.name == "local"
    with pytest.raises(NoCapacity, match="busy"):
        scheduler.acquire_host(Owner("run", 2))  # the silent host's free places do not count


def test_its_runs_end_in_error_and_are_refunded_once(silent_host, project, owner):
    run = running_run(project, owner, silent_host)
    elsewhere = running_run(project, owner, SandboxHost.objects.get(name="local"))

    health.check_hosts()
    health.check_hosts()

    run.refresh_from_db()
    assert run.status == "error" and "stopped answering" in run.status_message and run.finished_at
    assert LedgerEntry.objects.filter(kind="refund", reference=RUNS.reference(run.pk)).count() == 1
    assert Run.objects.get(pk=elsewhere.pk).status == "running"
    assert not LedgerEntry.objects.filter(kind="refund", reference=RUNS.reference(elsewhere.pk)).exists()


def test_it_comes_back_when_it_answers_again(silent_host):
    health.check_hosts()
    local = SandboxHost.objects.get(name="local")
    SandboxHost.objects.filter(pk=silent_host.pk).update(backend=local.backend, url=local.url)  # the engine is back
    assert health.check_hosts()["unhealthy"] == []
    silent_host.refresh_from_db()
    assert silent_host.healthy and silent_host.last_error == ""


def test_an_engine_without_the_sandbox_image_takes_no_runs_but_keeps_its_running_ones(settings, project, owner):
    local = SandboxHost.objects.get(name="local")
    run = running_run(project, owner, local)
    settings.SANDBOX_IMAGE = "belvedir-no-such-image:latest"
    assert health.check_hosts() == {"healthy": [], "unhealthy": ["local"]}
    local.refresh_from_db()
    assert not local.healthy and "missing" in local.last_error
    assert Run.objects.get(pk=run.pk).status == "running"


def test_disabled_hosts_are_not_checked(silent_host):
    SandboxHost.objects.filter(pk=silent_host.pk).update(enabled=False)
    assert health.check_hosts() == {"healthy": ["local"], "unhealthy": []}


def test_the_command_checks_every_enabled_host(silent_host):
    out = StringIO()
    call_command("check_hosts", stdout=out)
    assert "local: healthy" in out.getvalue() and "silent: UNHEALTHY" in out.getvalue() and "unreachable" in out.getvalue()


# -- the admin -------------------------------------------------------------------


def test_the_admin_lists_health_runtime_capacity_gpu_slots_use_and_drain(staff_client, silent_host):
    SandboxHost.objects.filter(pk=silent_host.pk).update(healthy=False, last_error="Docker engine is unreachable", last_checked_at=timezone.now())
    SandboxHost.objects.create(name="gpu-box", url="tcp://10.0.0.9:2376", kind="gpu", gpu_count=4, draining=True, runtime="runsc")
    page = staff_client.get("/admin/sandbox/sandboxhost/").content.decode()
    for heading in ("Healthy", "Runtime", "Capacity", "In use", "Gpu count", "Draining", "Last checked at", "Last error"):
        assert heading in page, heading
    assert "Docker engine is unreachable" in page and "gpu-box" in page
    assert 'alt="False"' in page  # the silent host's health icon


def test_tls_secrets_are_never_shown_and_the_mask_keeps_them(staff_client):
    host = SandboxHost.objects.create(
        name="remote", url="tcp://10.0.0.9:2376", tls_ca="/etc/belvedir/ca.pem", tls_cert="/etc/belvedir/cert.pem", tls_key=PEM_KEY
    )
    url = f"/admin/sandbox/sandboxhost/{host.pk}/change/"
    page = staff_client.get(url).content.decode()
    assert "c2VjcmV0LWtleS1tYXRlcmlhbA" not in page and "/etc/belvedir/cert.pem" not in page
    assert page.count(MASK) >= 3

    form = {
        "name": "remote",
        "backend": "docker",
        "url": "tcp://10.0.0.9:2376",
        "kind": "cpu",
        "gpu_type": "",
        "gpu_count": 0,
        "gpu_device_requests": "on",
        "capacity": 6,
        "runtime": "auto",
        "enabled": "on",
        "created_at_0": "2026-01-01",
        "created_at_1": "00:00:00",
        "tls_ca": MASK,
        "tls_cert": "/etc/belvedir/new-cert.pem",
        "tls_key": MASK,
    }
    response = staff_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    host.refresh_from_db()
    assert host.capacity == 6
    assert (host.tls_ca, host.tls_cert, host.tls_key) == ("/etc/belvedir/ca.pem", "/etc/belvedir/new-cert.pem", PEM_KEY)
    assert host.engine.key == PEM_KEY and PEM_KEY not in repr(host.engine)


def test_a_client_certificate_needs_its_key(staff_client):
    form = {
        "name": "half",
        "backend": "docker",
        "url": "tcp://10.0.0.9:2376",
        "kind": "cpu",
        "gpu_type": "",
        "gpu_count": 0,
        "capacity": 4,
        "runtime": "auto",
        "enabled": "on",
        "created_at_0": "2026-01-01",
        "created_at_1": "00:00:00",
        "tls_ca": "",
        "tls_cert": "/etc/belvedir/cert.pem",
        "tls_key": "",
    }
    response = staff_client.post("/admin/sandbox/sandboxhost/add/", form)
    assert response.status_code == 200 and "give both or neither" in response.content.decode()
    assert not SandboxHost.objects.filter(name="half").exists()


def test_check_now_in_the_admin(staff_client, silent_host):
    local = SandboxHost.objects.get(name="local")
    response = staff_client.post("/admin/sandbox/sandboxhost/", {"action": "check_now", "_selected_action": [local.pk, silent_host.pk]}, follow=True)
    page = response.content.decode()
    assert "Local: healthy." in page and "Silent: unhealthy" in page
    silent_host.refresh_from_db()
    assert not silent_host.healthy and silent_host.last_checked_at
