"""Trace retention drops whole months of spans and keeps what still matters."""

from datetime import UTC, datetime

import pytest
from django.db import connection

from agent_tasks.models import Trial
from harnesses.models import Harness, Run
from traces.models import Span, Task, TraceSession
from traces.partitions import apply_retention, existing_months
from traces.segmentation import segment

from .otlp_builders import body, span
from .test_agent_job_rules import task_set

# Committed like production: a partition holding rows inserted in the same
# open transaction (deferred foreign-key checks pending) cannot be dropped.
pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 11, 15, 12, tzinfo=UTC)


def at(year, month, day=10):
    return datetime(year, month, day, tzinfo=UTC).timestamp()


@pytest.fixture
def history(api, project):
    """Spans from June to November 2026 in five sessions, each segmented into tasks."""
    harness = Harness.objects.create(project=project, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    run = Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=50, status="succeeded")
    trial = Trial.objects.create(task=task_set(project, None, ["t"]).tasks.get(), agent="reference", status="succeeded")
    sessions = {
        "june-only": [at(2026, 6)],
        str(run.pk): [at(2026, 7)],  # a run's session, all in July
        trial.own_session: [at(2026, 7)],  # and a trial's
        "july-to-sept": [at(2026, 7, 31), at(2026, 9)],
        "august": [at(2026, 8, 1)],  # the first day of the oldest month kept
        "now": [at(2026, 11)],
    }
    spans = [
        span(f"{sid}-{i}", session_id=sid, start_s=start, user_message=f"hello {sid}") for sid, starts in sessions.items() for i, start in enumerate(starts)
    ]
    assert api.generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200
    # Linked as their own keys link them (tests/test_trial_traces.py).
    TraceSession.objects.filter(session_id=str(run.pk)).update(run=run)
    TraceSession.objects.filter(session_id=trial.own_session).update(trial=trial)
    for session in TraceSession.objects.all():
        segment(session)
    TraceSession.objects.filter(session_id__in=[str(run.pk), "july-to-sept"]).update(outcome="success")
    return run


def months_present():
    return sorted(existing_months())


def test_it_drops_exactly_the_months_past_retention(settings, history):
    settings.TRACE_RETENTION_MONTHS = 3
    before = months_present()
    assert {(2026, 6), (2026, 7), (2026, 8), (2026, 9), (2026, 11)} <= set(before)

    dropped = apply_retention(NOW)

    # Three months back from November 15 is August 15: July ends before it,
    # August does not. (Older months other tests made go too.)
    assert dropped[-2:] == ["traces_span_2026_06", "traces_span_2026_07"]
    assert dropped == [f"traces_span_{y:04d}_{m:02d}" for y, m in before if (y, m) < (2026, 8)]
    # And this month and the next exist, ready for spans.
    assert set(months_present()) == {month for month in before if month >= (2026, 8)} | {(2026, 11), (2026, 12)}
    assert sorted(Span.objects.values_list("name", flat=True)) == ["august-0", "july-to-sept-1", "now-0"]


def test_sessions_that_still_matter_are_kept(settings, history):
    settings.TRACE_RETENTION_MONTHS = 3
    apply_retention(NOW)

    run_session, trial = str(history.pk), Trial.objects.get()
    assert set(TraceSession.objects.values_list("session_id", flat=True)) == {run_session, trial.own_session, "july-to-sept", "august", "now"}
    # A run's session keeps its outcome and totals as the run's record; its tasks went with its spans.
    kept = TraceSession.objects.get(session_id=run_session)
    assert (kept.run, kept.outcome, kept.span_count) == (history, "success", 1)
    assert not Task.objects.filter(session=kept).exists()
    # So does a job's trial's, as the trial's.
    assert TraceSession.objects.get(session_id=trial.own_session).trial == trial
    # A session that lost some spans keeps its outcome and is segmented again from what is left.
    partly = TraceSession.objects.get(session_id="july-to-sept")
    assert partly.needs_processing and partly.outcome == "success"
    segment(partly)
    partly.refresh_from_db()
    assert partly.span_count == 1 and partly.first_span_at.month == 9
    assert list(Task.objects.filter(session=partly).values_list("name", flat=True)) == ["july-to-sept-1"]
    # Untouched sessions are untouched.
    assert not TraceSession.objects.get(session_id="now").needs_processing


def test_without_a_retention_setting_nothing_is_dropped_and_coming_months_are_made(settings, history):
    settings.TRACE_RETENTION_MONTHS = 0
    assert apply_retention(datetime(2027, 1, 10, tzinfo=UTC)) == []
    assert Span.objects.count() == 7
    assert {(2027, 1), (2027, 2)} <= set(months_present())


def test_spans_arriving_for_a_dropped_month_get_it_back(settings, history, api):
    settings.TRACE_RETENTION_MONTHS = 3
    apply_retention(NOW)
    late = span("late", session_id="late", start_s=at(2026, 6, 20))
    assert api.generic("POST", "/api/v1/traces", body([late]), content_type="application/json").status_code == 200
    assert Span.objects.filter(name="late").exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM traces_span_2026_06")
        assert cursor.fetchone()[0] == 1
