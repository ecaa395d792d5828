"""Many workers over Redis: two worker machines, one SIGKILLed mid-way, and nothing is lost or done twice.

Each machine is a process group running `manage.py qcluster` (paid runs)
and `Q_CLUSTER_NAME=evals manage.py qcluster` (evals) on the test database,
with django-q2's Redis broker (BELVEDIR_TEST_REDIS_URL, default DB 15 of the
local Redis; only this test's two queue keys are touched). Runs are real
harness runs in Docker sandboxes behind the egress proxy; evals are gsm8k
against a fake OpenAI server. The passes the worker schedules every minute
(reaper, re-queue, eval resume) are called by the test with short
thresholds, so it does not wait for django-q2's scheduler.
"""

import os
import threading
import time
from collections import Counter
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import redis
from django.db.models import F, Sum

from belvedir.sandbox.models import SandboxHost, SandboxLease
from belvedir.sandbox.reaper import reap
from billing.models import Account, LedgerEntry
from evals.actions import create_eval
from evals.models import Deployment, Eval, Sample
from evals.tasks import requeue_lost_evals
from harnesses.actions import start_run
from harnesses.models import Run
from harnesses.tasks import requeue_lost_runs

from .conftest import OUTSIDE_ADDRESS
from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import fund, harness, make_repo, wait_for
from .workers import EVALS, RUNS, WorkerMachine

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]

REDIS_URL = os.environ.get("BELVEDIR_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
QUEUE_KEYS = [f"django_q:{queue}:q" for queue in (RUNS, EVALS)]
RUNS_COUNT, EVALS_COUNT, ROWS = 20, 5, 24
STALE = 10  # seconds: reaper, eval resume and re-queue thresholds, all well past the 1-2 s heartbeats

# The side effect that counts executions: each run calls the outside server
# once, from inside its sandbox, before it sleeps.
RUN_PY = """
import json, os, time, urllib.request
urllib.request.urlopen("http://{outside}/ran/" + os.environ["FRACTAL_RUN_ID"], timeout=20).read()
time.sleep(4)
json.dump({{"score": 1}}, open("results.json", "w"))
"""


@pytest.fixture
def redis_queues(monkeypatch):
    """This process enqueues through Redis as production does (the test settings use the ORM broker)."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "REDIS", REDIS_URL)
    connection = redis.from_url(REDIS_URL)
    connection.delete(*QUEUE_KEYS)
    yield connection
    connection.delete(*QUEUE_KEYS)


@pytest.fixture
def executions():
    """An outside server on OUTSIDE_ADDRESS (which the test proxy allows) counting each run's calls."""
    calls = Counter()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            calls[self.path.rsplit("/", 1)[-1]] += 1
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((OUTSIDE_ADDRESS, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"{OUTSIDE_ADDRESS}:{server.server_address[1]}", calls
    server.shutdown()


@pytest.fixture
def machines(subprocess_env, egress, live_server, redis_queues, tmp_path):
    env = {
        **subprocess_env,
        "REDIS_URL": REDIS_URL,
        "Q_WORKERS": "2",
        "Q_EVAL_WORKERS": "2",
        "BELVEDIR_ALLOW_LOCAL_REPOS": "1",
        "BELVEDIR_HARNESS_NETWORK": "egress",
        "BELVEDIR_EGRESS_SOCKET_DIR": str(egress),
        "BELVEDIR_BASE_URL": live_server.url,
        "BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS": "1",
        # The surviving cluster's own schedules (reaper, re-queue, resume) use the test's thresholds too.
        "BELVEDIR_RUN_STALE_SECONDS": str(STALE),
        "BELVEDIR_EVAL_STALE_SECONDS": str(STALE),
        "BELVEDIR_REQUEUE_AFTER_SECONDS": str(STALE),
    }
    started = [WorkerMachine(name, env, tmp_path).start() for name in ("a", "b")]
    try:
        for machine in started:
            machine.wait_ready()
        yield started
    finally:
        for machine in started:
            machine.stop()


def _ended(model, ids) -> bool:
    return not model.objects.filter(pk__in=ids, status__in=model.ACTIVE).exists()


# Its own deadlines (180 s for three runs and evals to start, 360 s for all to
# end) name what is stuck and print the surviving worker's output; the
# suite's 300 s limit would cut in before them with less to go on.
@pytest.mark.timeout(600)
def test_two_workers_one_killed_mid_way_lose_nothing_and_do_nothing_twice(machines, executions, owner, project, settings, tmp_path):
    settings.PROJECT_MAX_ACTIVE_RUNS = RUNS_COUNT
    settings.PROJECT_MAX_ACTIVE_EVALS = EVALS_COUNT
    settings.HARNESS_STALE_SECONDS = settings.EVAL_STALE_SECONDS = settings.REQUEUE_AFTER_SECONDS = STALE
    # Transactional tests flush the host the migration seeded; room for every worker's run and the killed ones'.
    SandboxHost.objects.update_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL, "capacity": 8, "runtime": "runc"})
    outside, calls = executions
    fund(project, 100_000)
    balance_before = Account.balance_for(project)
    make_repo(tmp_path / "repo", {"run.py": RUN_PY.format(outside=outside)})
    h = harness(project, owner, tmp_path / "repo")
    killed, survivor = machines

    with FakeOpenAI(answer=lambda q: "#### 7", latency=0.5) as fake:
        # One deployment per eval: the fake's requests say which eval asked.
        deployments = [
            Deployment.objects.create(project=project, name=f"d{i}", base_url=fake.url, model=f"model-{i}", max_in_flight=2) for i in range(EVALS_COUNT)
        ]
        evals = [create_eval(project, owner, deployment=d, benchmark="gsm8k", sample_limit=ROWS) for d in deployments]
        runs = [start_run(h, owner) for _ in range(RUNS_COUNT)]
        run_ids, eval_ids = [r.pk for r in runs], [e.pk for e in evals]

        # Two run workers and two eval workers per machine: with three of
        # each busy, the machine to be killed holds at least one of each.
        wait_for(
            lambda: (
                Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING).count() >= 3
                and Eval.objects.filter(pk__in=eval_ids, status=Eval.Status.RUNNING).count() >= 3
            ),
            timeout=180,
            interval=0.1,
        )
        killed.kill()
        time.sleep(0.5)
        stored_before_kill = {(s.eval.deployment.model, s.input) for s in Sample.objects.filter(eval__in=eval_ids).select_related("eval__deployment")}

        deadline = time.monotonic() + 360
        while not (_ended(Run, run_ids) and _ended(Eval, eval_ids)):
            assert time.monotonic() < deadline, (
                list(Run.objects.filter(pk__in=run_ids).values_list("pk", "status")),
                list(Eval.objects.filter(pk__in=eval_ids).values_list("pk", "status", "done_count")),
                survivor.output(),
            )
            assert survivor.alive(), survivor.output()
            reap()  # ends runs whose worker died (refunded), resumes such evals
            requeue_lost_runs()
            requeue_lost_evals()
            time.sleep(1)
        requests = Counter((r["body"]["model"], r["body"]["messages"][-1]["content"]) for r in fake.requests)

    # The killed machine held runs in their sandboxes, evals in progress, and
    # runs it had taken from Redis but not started (sent again: queued_at moved).
    # (Counted in the database: the surviving cluster's schedules may have done some of it.)
    reaped = Run.objects.filter(pk__in=run_ids, status="error").count()
    resumed = Eval.objects.filter(pk__in=eval_ids, passes__gte=2).count()
    requeued = Run.objects.filter(pk__in=run_ids, queued_at__gt=F("created_at") + timedelta(seconds=STALE)).count()
    assert reaped >= 1 and resumed >= 1 and requeued >= 1, (reaped, resumed, requeued)

    # Runs: each ended once. Those the killed worker was running ended `error`,
    # refunded (the platform's fault); none was started a second time.
    ended = list(Run.objects.filter(pk__in=run_ids).order_by("pk"))
    by_status = Counter(r.status for r in ended)
    assert set(by_status) <= {"succeeded", "error"} and by_status["error"] == reaped, by_status
    for run in ended:
        if run.status == "error":
            assert "worker running this run stopped" in run.status_message
        assert calls[str(run.pk)] <= 1, f"run {run.pk} executed {calls[str(run.pk)]} times"
        assert calls[str(run.pk)] == 1 or run.status == "error", (run.pk, run.status, run.log_tail)
        entries = Counter(LedgerEntry.objects.filter(reference=f"run:{run.pk}").values_list("kind", flat=True))
        assert entries == ({"run_charge": 1, "refund": 1} if run.status == "error" else {"run_charge": 1}), (run.pk, entries)
    assert not (set(calls) - {str(pk) for pk in run_ids})
    wait_for(lambda: not SandboxLease.objects.exists(), timeout=30)

    # Money: the cached balance is the ledger's sum, and it moved by exactly the unrefunded charges.
    account = Account.for_project(project)
    account.refresh_from_db()
    assert account.balance_cents == LedgerEntry.objects.filter(account=account).aggregate(s=Sum("amount_cents"))["s"]
    assert account.balance_cents == balance_before - h.price_cents * by_status["succeeded"]

    # Evals: every one finished, every row stored once; a row stored before
    # the kill was never asked for again after the resume.
    for ev in Eval.objects.filter(pk__in=eval_ids).select_related("deployment"):
        assert ev.status == "succeeded", (ev.pk, ev.status, ev.status_message)
        rows = list(Sample.objects.filter(eval=ev).values_list("row_index", flat=True))
        assert len(rows) == len(set(rows)) == ev.total == ev.done_count == ROWS
        assert all(requests[(ev.deployment.model, s.input)] >= 1 for s in Sample.objects.filter(eval=ev))
    assert stored_before_kill and all(requests[key] == 1 for key in stored_before_kill)
