"""Faults injected for real: the database going away under ingest load."""

import subprocess
from pathlib import Path

import pytest
from django.db import connection

from traces.models import Span

from .concurrency import start_thread
from .otlp_builders import body, span

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def postgres(action: str):
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action, *(["-m", "fast"] if action == "stop" else [])], check=True, timeout=60
    )
    if action == "start":
        subprocess.run(["pg_isready", "-h", "127.0.0.1", "-t", "30"], check=True, timeout=60)


def test_ingest_answers_503_while_postgres_restarts_and_loses_no_accepted_span(api_key, settings):
    import threading
    import time

    if connection.vendor != "postgresql":
        pytest.fail("this fault needs PostgreSQL")
    # Production's persistent connections (conftest sets 0 for live servers):
    # after the restart every sender holds a dead connection it must replace.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 60
    stop_sending = threading.Event()
    lock = threading.Lock()
    accepted, results, retry_afters = [], [], set()  # results: (started, ended, status, sender)

    def sender(number):
        from rest_framework.test import APIClient

        api = APIClient()  # one per thread, as separate exporters would be
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
        count = 0
        while not stop_sending.is_set():
            spans = [span(f"s{number}-{count}-{i}", session_id="fault") for i in range(50)]
            started = time.monotonic()
            response = api.generic("POST", "/api/v1/traces", body(spans), content_type="application/json")
            with lock:
                results.append((started, time.monotonic(), response.status_code, number))
                if response.status_code == 200:
                    accepted.extend(s["spanId"] for s in spans)
                elif response.status_code == 503:
                    retry_afters.add((response["Retry-After"], "retry" in response.json()["detail"]))
            count += 1

    senders = [start_thread(sender, n) for n in range(4)]
    try:
        time.sleep(1.5)
        stopped_at = time.monotonic()
        postgres("stop")
        time.sleep(1)
    finally:
        postgres("start")
        restarted_at = time.monotonic()
        connection.close()  # this thread's own connection died with the server too
    time.sleep(3)
    stop_sending.set()
    for thread in senders:
        thread.join(60)

    statuses = [status for *_, status, _ in results]
    assert 500 not in statuses and set(statuses) <= {200, 503}, statuses
    # Requests were in flight when the database stopped...
    assert any(started < stopped_at < ended for started, ended, *_ in results)
    assert 503 in statuses and retry_afters == {("5", True)}
    # ...and every sender recovered once it was back, on a fresh connection.
    for number in range(4):
        after = [status for started, _, status, who in results if who == number and started > restarted_at + 1]
        assert after and after[-1] == 200, (number, after)
    stored = set(Span.objects.filter(session_id="fault").values_list("span_id", flat=True))
    assert stored == set(accepted)


@pytest.mark.docker
def test_the_docker_engine_stopping_during_a_run_errors_and_refunds_while_the_platform_stays_up(
    project, owner, settings, tmp_path, owner_client, docker_url, egress
):
    import signal
    import time

    from belvedir.sandbox.backends.docker_engine import managed_containers
    from belvedir.sandbox.models import SandboxHost
    from belvedir.sandbox.reaper import reap
    from billing.models import Account
    from harnesses.actions import start_run
    from harnesses.execution import execute_run
    from harnesses.models import Run

    from .harness_fixtures import fund, harness, make_repo, run_status, wait_for

    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    SandboxHost.objects.get_or_create(name="local", defaults={"url": docker_url})
    fund(project, 1000)
    make_repo(tmp_path / "repo", {"run.py": "import time\nprint('working', flush=True)\ntime.sleep(600)"})
    run = start_run(harness(project, owner, tmp_path / "repo"), owner)
    before = Account.balance_for(project)
    worker = start_thread(execute_run, run.pk)
    wait_for(lambda: run_status(run) == "running", timeout=90)
    dockerd = int(subprocess.run(["pgrep", "-xo", "dockerd"], capture_output=True, text=True, check=True).stdout.split()[0])
    try:
        os_kill(dockerd, signal.SIGTERM)
        worker.join(120)
        assert not worker.is_alive()
        run.refresh_from_db()
        assert run.status == "error" and "Platform error during the run" in run.status_message
        assert Account.balance_for(project) == before + run.price_cents  # refunded
        # The platform itself stays up and says why.
        page = owner_client.get(f"/runs/{run.pk}/").content.decode()
        assert "Platform error during the run" in page
    finally:
        subprocess.run(["scripts/ensure_docker.sh"], check=True, timeout=180, cwd=Path(__file__).resolve().parent.parent)
    deadline = time.monotonic() + 60
    while managed_containers(docker_url) and time.monotonic() < deadline:
        reap()
        time.sleep(1)
    assert Run.objects.get(pk=run.pk).status == "error"


def os_kill(pid, sig):
    import os

    os.kill(pid, sig)
