"""Evals of any length finish: a pass ends itself at its time limit and queues the next; only a pass that stored nothing is a stall."""

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from evals import queue as eval_queue
from evals.actions import create_eval
from evals.engine import refresh_counters
from evals.models import Deployment, Eval, Sample
from evals.subset import select_rows
from evals.tasks import resume_stale_evals, run_eval

from .fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]


@pytest.fixture
def fake():
    with FakeOpenAI(answer=lambda text: "#### 1") as server:
        yield server


@pytest.fixture
def queue(monkeypatch):
    """The eval queue, held here: each message is run by the test, one pass at a time."""
    sent = []
    monkeypatch.setattr(eval_queue, "enqueue", lambda ev: sent.append(ev.pk))
    return sent


def run_passes(queue, limit=20) -> list[tuple[str, str, int]]:
    """Run queued passes until none is queued; (status, message, rows stored) after each."""
    after = []
    while queue and len(after) < limit:
        eval_id = queue.pop(0)
        run_eval(eval_id)
        ev = Eval.objects.get(pk=eval_id)
        after.append((ev.status, ev.status_message, ev.done_count))
    return after


def test_a_pass_nests_inside_the_task_timeout():
    in_flight_worst = django_settings.EVAL_REQUEST_TIMEOUT_SECONDS * django_settings.EVAL_MAX_ATTEMPTS
    assert django_settings.EVAL_PASS_SECONDS + in_flight_worst < django_settings.Q_CLUSTER["timeout"]


def test_a_long_eval_finishes_over_several_passes_resuming_where_each_stopped(project, owner, fake, queue, settings):
    # The pass's share of the task limit, shortened to a second; 40 rows at 4 in flight and 0.25 s each take 2.5 s.
    settings.EVAL_PASS_SECONDS = 1
    fake.latency = 0.25
    deployment = Deployment.objects.create(project=project, name="slow", base_url=fake.url, model="m", max_in_flight=4)
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=40)
    passes = run_passes(queue)
    assert len(passes) >= 2
    *between, last = passes
    assert all(status == "queued" and message.startswith("Continues in its next pass") for status, message, _ in between)
    stored = [done for _, _, done in passes]
    assert stored == sorted(set(stored)) and 0 < stored[0] < 40  # every pass stored rows, none stored them all but the last
    assert last[0] == "succeeded" and last[2] == 40
    # Each row was requested once: every pass went on from where the one before stopped.
    assert len(fake.requests) == 40
    assert sorted(Sample.objects.filter(eval=ev).values_list("row_index", flat=True)) == sorted(select_rows(1319, 40, ev.seed))
    ev.refresh_from_db()
    assert ev.passes == len(passes) and ev.auto_resumes == 0 and ev.score == Sample.objects.filter(eval=ev, score=1).count() / 40


def test_passes_that_store_nothing_are_stalls_and_end_the_eval_after_the_bound(project, owner, fake, queue, settings):
    settings.EVAL_PASS_SECONDS = 0  # each pass is out of time before its first request
    settings.EVAL_MAX_AUTO_RESUMES = 2
    deployment = Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="m")
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=5)
    passes = run_passes(queue)
    assert [status for status, _, _ in passes] == ["queued", "queued", "error"]
    assert passes[-1][1].startswith("3 passes in a row stored nothing")
    assert fake.requests == [] and not Sample.objects.filter(eval=ev).exists()


def test_a_stall_after_progress_starts_the_count_again(project, owner, fake, settings):
    settings.EVAL_MAX_AUTO_RESUMES = 2
    deployment = Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="m")
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=10)
    long_ago = timezone.now() - timezone.timedelta(hours=1)
    statuses = []
    for row in range(6):
        # A worker claims it, stores a row (its flush refreshes the counters), and dies without another heartbeat.
        Eval.objects.filter(pk=ev.pk, status="queued").update(status="running")
        Sample.objects.create(eval=ev, row_index=row, input="q", output="#### 1", score=1.0)
        refresh_counters(ev.pk)
        Eval.objects.filter(pk=ev.pk).update(heartbeat_at=long_ago)
        resume_stale_evals()
        statuses.append(Eval.objects.get(pk=ev.pk).status)
    # Six stalls, but never two in a row without progress: every one is resumed.
    assert statuses == ["queued"] * 6
    assert Eval.objects.get(pk=ev.pk).auto_resumes == 1
