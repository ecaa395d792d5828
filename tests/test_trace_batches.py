"""Ingest answers before it stores: accepted batches, the worker that stores them, and what survives its death."""

import json
import signal
import subprocess
import sys
import threading
import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from traces.batches import drain, process_pending
from traces.models import BatchProcessor, IngestRejection, Span, TraceBatch, TraceSession

from .harness_fixtures import wait_for
from .otlp_builders import body, span
from .servers import REPO
from .test_trace_ingest import run_key  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def deferred(settings):
    settings.TRACE_INGEST_INLINE = False


def post(client, payload, content_type="application/json"):
    return client.generic("POST", "/api/v1/traces", payload, content_type=content_type)


def test_it_answers_once_the_batch_is_kept_and_a_worker_stores_the_spans(api, project, deferred):
    spans = [span("a", session_id="s1", tokens=(5, 2)), span("b", session_id="s1", tokens=(7, 1))]
    response = post(api, body(spans))
    assert response.status_code == 200 and response.json() == {}
    batch = TraceBatch.objects.get()
    assert (batch.project, batch.span_count, batch.content_type) == (project, 2, "application/json")
    assert not Span.objects.exists() and not TraceSession.objects.exists()

    assert process_pending() == 1
    assert sorted(Span.objects.values_list("name", flat=True)) == ["a", "b"]
    assert Span.objects.get(name="a").received_at == batch.received_at
    session = TraceSession.objects.get(session_id="s1")
    assert (session.span_count, session.input_tokens, session.output_tokens) == (2, 12, 3)
    assert not TraceBatch.objects.exists()
    assert process_pending() == 0


def test_storing_a_batch_leaves_the_garbage_collector_nothing_to_walk(api, deferred):
    import gc

    post(api, body([span(f"s{i}", session_id=f"chat-{i % 20}", attributes={"gen_ai.prompt.0.content": "hi " * 50}) for i in range(1000)]))
    collections = []
    gc.collect()  # from a clean slate: what follows is the pass's own doing
    gc.callbacks.append(collect := lambda phase, info: phase == "start" and collections.append(info["generation"]))
    try:
        assert process_pending() == 1
    finally:
        gc.callbacks.remove(collect)
    # Its ~100,000 dicts and lists are freed before the collector is back
    # on: re-enabled while they lived, it walked them all, and the whole
    # process every few passes.
    assert Span.objects.count() == 1000 and collections == []


def test_a_batch_sent_twice_is_stored_once(api, deferred):
    payload = body([span("x", session_id="s"), span("y", session_id="s")])
    post(api, payload)
    post(api, payload)
    assert TraceBatch.objects.count() == 2
    assert drain() == 2
    assert Span.objects.count() == 2 and not TraceBatch.objects.exists()


def test_a_runs_key_is_looked_up_once_by_the_request_and_its_batch_keeps_the_session_it_may_write(run_key, deferred, monkeypatch):
    import dataclasses

    from traces import workload_keys

    client, own = run_key
    post(client, body([span("mine", session_id=own), span("forged", session_id="chat-7")]))
    assert TraceBatch.objects.get().own_session == own

    def looked_up_again(key_id):
        raise AssertionError("the worker looked up the key's run again")

    monkeypatch.setattr(workload_keys, "_kinds", {name: dataclasses.replace(kind, of_key=looked_up_again) for name, kind in workload_keys._kinds.items()})
    assert process_pending() == 1
    assert list(Span.objects.values_list("name", "session_id")) == [("mine", own)]
    assert TraceSession.objects.get().run_id == int(own)


def test_an_outcome_reported_right_after_sending_finds_its_session(api, deferred):
    # An SDK flushes, then reports: the spans are accepted, not yet stored.
    post(api, body([span("x", session_id="chat-1")]))
    response = api.post("/api/v1/outcomes", {"session_id": "chat-1", "outcome": "success"}, format="json")
    assert response.status_code == 200 and response.json()["outcome"] == "success"
    assert not TraceBatch.objects.exists() and Span.objects.filter(session_id="chat-1").exists()
    assert api.post("/api/v1/outcomes", {"session_id": "never-sent", "outcome": "fail"}, format="json").status_code == 404


def test_when_the_workers_fall_behind_ingest_pushes_back(api, deferred, settings, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from traces import backlog

    settings.TRACE_INGEST_MAX_LAG_SECONDS = 1.5
    monkeypatch.setattr(backlog, "LOOK_SECONDS", 0)
    post(api, body([span("old")]))
    # No processor has published a rate: the oldest batch's age is the lag.
    TraceBatch.objects.update(received_at=timezone.now() - timedelta(seconds=5))
    refused = post(api, body([span("new")]))
    # 5 s behind against a limit of 1.5: come back in the 3.5 s it takes to catch up.
    assert refused.status_code == 503 and refused["Retry-After"] == "4" and "behind" in refused.json()["detail"]
    assert TraceBatch.objects.count() == 1
    process_pending()
    assert post(api, body([span("new")])).status_code == 200


def test_a_request_just_past_the_limit_is_refused_at_once_holding_no_worker(api, deferred, settings, monkeypatch):
    from traces import backlog

    settings.TRACE_INGEST_MAX_LAG_SECONDS = 1.5
    monkeypatch.setattr(backlog, "current_lag", lambda: 1.55)
    started = time.monotonic()
    refused = post(api, body([span("refused")]))
    assert refused.status_code == 503 and refused["Retry-After"] == "1"
    assert time.monotonic() - started < 0.15 and not TraceBatch.objects.exists()


def test_a_batch_the_database_refuses_is_recorded_and_the_batches_behind_it_are_stored(api, deferred, monkeypatch):
    from psycopg.errors import NumericValueOutOfRange

    from traces import ingest

    post(api, body([span("refused", session_id="s1"), span("refused too", session_id="s1")]))
    post(api, body([span("behind it", session_id="s2")]))
    refused_batch = TraceBatch.objects.order_by("pk").first().pk
    real_upsert = ingest._upsert_sessions_postgres

    def refusing_upsert(project, sessions, now):
        # After the batch's COPY: what it wrote must go too.
        if "s1" in sessions:
            raise NumericValueOutOfRange("value out of range for type smallint")
        return real_upsert(project, sessions, now)

    monkeypatch.setattr(ingest, "_upsert_sessions_postgres", refusing_upsert)
    assert process_pending(limit=2) == 2  # one pass, one transaction: the refusal did not end it
    assert list(Span.objects.values_list("name", flat=True)) == ["behind it"]
    assert list(TraceSession.objects.values_list("session_id", flat=True)) == ["s2"]
    assert not TraceBatch.objects.filter(pk=refused_batch).exists() and not TraceBatch.objects.exists()
    rejection = IngestRejection.objects.get()
    assert rejection.rejected == 2 and rejection.reasons == ["The platform could not store this batch (NumericValueOutOfRange)."]


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _waiting_batches(project, count, spans_each):
    from datetime import timedelta

    from django.utils import timezone

    # Received "in the future": the age then never outweighs the queue, however slowly this test runs.
    later = timezone.now() + timedelta(hours=1)
    return [
        TraceBatch.objects.create(project=project, body=b"{}", content_type="application/json", span_count=spans_each, received_at=later).pk
        for _ in range(count)
    ]


def _processor(name, rate, seconds_ago=0.0):
    from datetime import timedelta

    from django.utils import timezone

    return BatchProcessor.objects.create(name=name, spans_per_second=rate, seen_at=timezone.now() - timedelta(seconds=seconds_ago))


def test_the_lag_counts_the_queue_ahead_at_the_rate_the_live_processors_store(project):
    from traces.backlog import STALE_SECONDS, Backlog

    clock = FakeClock()
    backlog = Backlog(clock)
    _waiting_batches(project, 10, 1000)
    # Two processors storing 6,000 and 2,000 spans a second: 10,000 spans
    # waiting are a 1.25 s wait for a batch accepted now, though the oldest
    # waiting batch is brand new. One that stopped answering (killed) stores
    # nothing, whatever rate it last published.
    _processor("web-1:11", 6000)
    _processor("web-1:12", 2000)
    _processor("gone:13", 50_000, seconds_ago=STALE_SECONDS + 1)
    assert backlog.lag() == pytest.approx(1.25)
    # The view is kept for a tenth of a second, then looked at again.
    BatchProcessor.objects.filter(name="web-1:12").update(spans_per_second=14_000)
    assert backlog.lag() == pytest.approx(1.25)
    clock.now += 0.2
    assert backlog.lag() == pytest.approx(0.5)


def test_a_draining_queue_is_not_judged_by_the_age_of_its_front(project):
    from datetime import timedelta

    from django.utils import timezone

    from traces.backlog import Backlog

    backlog = Backlog(FakeClock())
    # The front batch waited 1.6 s behind a burst, now stored; 16,000 spans
    # are left, at 20,000 a second: a batch accepted now waits 0.8 s.
    _waiting_batches(project, 16, 1000)
    TraceBatch.objects.update(received_at=timezone.now() - timedelta(seconds=1.6))
    _processor("web-1:11", 20_000)
    assert backlog.lag() == pytest.approx(0.8)


def test_stopped_processors_leave_the_age_to_decide(project):
    from datetime import timedelta

    from django.utils import timezone

    from traces.backlog import Backlog

    backlog = Backlog(FakeClock())
    _waiting_batches(project, 3, 1000)
    TraceBatch.objects.update(received_at=timezone.now() - timedelta(seconds=7))
    # No processor has published a rate: nothing to divide by, and the
    # oldest batch has waited 7 s.
    _processor("starting:1", None)
    assert backlog.lag() == pytest.approx(7, abs=0.5)


def test_a_processor_publishes_its_rate_over_its_recent_batches(db):
    from datetime import timedelta

    from django.utils import timezone

    from traces.backlog import PUBLISH_SECONDS, RATE_MIN_PASSES, RATE_WINDOW_SECONDS, Meter

    clock = FakeClock()
    meter = Meter("worker-7:99", clock)
    _processor("killed-yesterday:1", 9000, seconds_ago=24 * 3600)
    _processor("killed-just-now:2", 9000, seconds_ago=10)
    # Its first batch: published at once. Rows of processors killed long ago
    # are cleared; a recent one is left to go stale.
    meter.stored(1000, 0.1)
    assert dict(BatchProcessor.objects.values_list("name", "spans_per_second")) == {"killed-just-now:2": 9000, "worker-7:99": 10_000}
    # Storing is timed, not the gaps between: 2,000 spans in 0.4 s of work,
    # published once the last publication is PUBLISH_SECONDS old.
    clock.now += 0.1
    meter.stored(1000, 0.3)
    assert BatchProcessor.objects.get(name="worker-7:99").spans_per_second == 10_000
    clock.now += PUBLISH_SECONDS
    meter.stored(0, 0.0)
    assert BatchProcessor.objects.get(name="worker-7:99").spans_per_second == pytest.approx(5000)
    # Batches past the window no longer count once RATE_MIN_PASSES newer ones
    # do: it is as fast as it is now.
    clock.now += RATE_WINDOW_SECONDS
    for _ in range(RATE_MIN_PASSES):
        meter.stored(3000, 0.1)
    clock.now += PUBLISH_SECONDS
    meter.stored(3000, 0.1)
    assert BatchProcessor.objects.get(name="worker-7:99").spans_per_second == pytest.approx(30_000)
    # Idle, it still says it is alive, with its last rate.
    BatchProcessor.objects.filter(name="worker-7:99").update(seen_at=timezone.now() - timedelta(seconds=3))
    clock.now += 1
    meter.publish()
    row = BatchProcessor.objects.get(name="worker-7:99")
    assert row.spans_per_second == pytest.approx(30_000) and (timezone.now() - row.seen_at).total_seconds() < 1
    meter.retire()
    assert not BatchProcessor.objects.filter(name="worker-7:99").exists()


def test_after_an_idle_spell_the_first_batch_back_does_not_decide_a_processors_rate(db):
    from traces.backlog import RATE_MIN_PASSES, RATE_WINDOW_SECONDS, Meter

    clock = FakeClock()
    meter = Meter("worker-8:1", clock)
    for _ in range(RATE_MIN_PASSES):
        meter.stored(1000, 0.05)  # 20,000 spans/s
    # Idle far past the window; then a burst arrives and slows its first batch
    # to 4,000 spans/s. Alone, that batch would say the queue drains five
    # times slower than it does, and clients would be sent away for seconds.
    clock.now += 10 * RATE_WINDOW_SECONDS
    meter.stored(1000, 0.25)
    # The oldest pass makes room for it; the other RATE_MIN_PASSES - 1 stay.
    expected = RATE_MIN_PASSES * 1000 / ((RATE_MIN_PASSES - 1) * 0.05 + 0.25)
    assert BatchProcessor.objects.get(name="worker-8:1").spans_per_second == pytest.approx(expected)
    assert expected > 15_000


def test_a_processors_rate_leaves_out_what_each_batch_costs_whatever_its_size(db):
    from traces.backlog import PUBLISH_SECONDS, SMALL_BATCH_SPANS, Meter

    clock = FakeClock()
    meter = Meter("worker-9:1", clock)
    # Batches of a few spans: their time is what any batch costs (6 ms), and
    # they say nothing yet of how fast spans go.
    for _ in range(4):
        meter.stored(SMALL_BATCH_SPANS, 0.006)
    row = BatchProcessor.objects.get(name="worker-9:1")
    assert row.seconds_per_batch == pytest.approx(0.006) and row.spans_per_second is None
    # A 1,000-span batch in 86 ms: 80 ms of it for its spans.
    clock.now += PUBLISH_SECONDS
    meter.stored(1000, 0.086)
    row = BatchProcessor.objects.get(name="worker-9:1")
    assert row.spans_per_second == pytest.approx(12_500) and row.seconds_per_batch == pytest.approx(0.006)


def test_small_batches_do_not_make_a_large_one_look_seconds_away(project):
    from traces.backlog import Backlog, Meter

    # Two processors that have lately stored only 1-span batches, at 6 ms a
    # pass. As a rate over whole passes that was 167 spans/s each, and one
    # 1,000-span batch waiting read as 3 s behind: the next request was
    # refused with nothing else waiting.
    for name in ("small-1:1", "small-1:2"):
        meter = Meter(name, FakeClock())
        for _ in range(16):
            meter.stored(1, 0.006)
    _waiting_batches(project, 1, 1000)
    # Now it costs them one batch, spread over two (and its spans, at a rate
    # they will know once they have stored a larger batch).
    assert Backlog(FakeClock()).lag() == pytest.approx(0.003)


def test_the_lag_adds_each_waiting_batchs_own_cost_shared_by_the_processors(project):
    from traces.backlog import Backlog

    backlog = Backlog(FakeClock())
    _waiting_batches(project, 40, 100)
    # 4,000 spans at 10,000 + 10,000 a second, and 40 batches at 10 ms each
    # (the processors' mean) over two processors.
    BatchProcessor.objects.create(name="a:1", spans_per_second=10_000, seconds_per_batch=0.008, seen_at=timezone.now())
    BatchProcessor.objects.create(name="a:2", spans_per_second=10_000, seconds_per_batch=0.012, seen_at=timezone.now())
    assert backlog.lag() == pytest.approx(4000 / 20_000 + 40 * 0.010 / 2)


@pytest.mark.parametrize(
    "spans",
    [
        [span("ok"), {**span("bad id"), "traceId": "xyz"}, {**span("null id"), "spanId": None}],
        ["a string", 7, None, [1], span("fine")],
        [{**span("snake"), "trace_id": "ab" * 16}, {k: v for k, v in span("only snake").items() if k != "traceId"} | {"trace_id": "cd" * 16}],
        [{**span("times"), "startTimeUnixNano": "later"}, {**span("backwards"), "endTimeUnixNano": "1"}, {**span("huge"), "endTimeUnixNano": str(2**64)}],
        # Well-formed on their face, for the fast path to take or leave whole:
        [span("a"), {**span("upper"), "traceId": "AB" * 16}, {**span("numbers"), "startTimeUnixNano": 5, "endTimeUnixNano": 6}],
        [span("fine"), {**span("zeros"), "traceId": "0" * 32}],
        [span("fine"), {**span("past int64"), "endTimeUnixNano": str(2**63)}],
        [{**span("null parent"), "parentSpanId": None}, {**span("newline"), "spanId": "ab" * 8 + "\n"}],
        [span("fine"), {**span("snake parent"), "parent_span_id": "xyz"}],
        # The right lengths, but not hex:
        [
            span("fine"),
            {**span("g"), "traceId": "g" * 32},
            {**span("accented parent"), "parentSpanId": "é" * 16},
            {**span("space"), "spanId": "ab cd ef 01 23 4"},
        ],
    ],
)
def test_the_requests_check_counts_what_the_full_parse_keeps(spans):
    from traces import otlp

    payload = body(spans)
    checked, parsed = otlp.check(payload, "application/json"), otlp.parse(payload, "application/json")
    assert (checked.accepted, checked.rejected) == (len(parsed.spans), parsed.rejected)
    assert checked.reasons == parsed.reasons


def test_a_body_of_well_formed_spans_is_counted_without_building_them():
    from traces import otlp

    assert otlp._all_valid_count(body([span(f"s{i}") for i in range(3)])) == 3
    # Anything else goes the full path, which words the answer.
    assert otlp._all_valid_count(body([span("a"), {**span("zeros"), "spanId": "0" * 16}])) is None
    assert otlp._all_valid_count(body([span("a"), {**span("not hex"), "parentSpanId": "0123456789abcdeg"}])) is None
    assert otlp._all_valid_count(json.dumps({"resource_spans": []}).encode()) is None


def test_garbage_is_refused_and_nothing_is_kept(api, deferred):
    assert post(api, b"{not json").status_code == 400
    assert post(api, body([span(f"s{i}") for i in range(1001)])).status_code == 413
    assert not TraceBatch.objects.exists()


def test_bad_spans_are_answered_as_partial_success_and_the_rest_is_kept(api, deferred):
    response = post(api, body([span("good"), {**span("bad"), "spanId": "abc"}]))
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert TraceBatch.objects.get().span_count == 1
    process_pending()
    assert list(Span.objects.values_list("name", flat=True)) == ["good"]
    assert not IngestRejection.objects.exists()


def test_a_body_with_only_bad_spans_keeps_no_batch(api, deferred):
    response = post(api, body([{**span("bad"), "traceId": "xyz"}]))
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert not TraceBatch.objects.exists()


def test_a_span_the_worker_refuses_after_acceptance_is_recorded(api, project, api_key, deferred):
    # The request's check looks at ids and times only; a malformed status is
    # found by the worker's full parse, after the client's 200.
    broken = {**span("broken"), "status": "not an object"}
    response = post(api, body([span("fine"), broken]))
    assert response.status_code == 200 and response.json() == {}
    process_pending()
    assert list(Span.objects.values_list("name", flat=True)) == ["fine"]
    rejection = IngestRejection.objects.get()
    assert (rejection.project, rejection.rejected) == (project, 1)
    assert rejection.api_key.name == "test" and "malformed" in rejection.reasons[0]
    assert not TraceBatch.objects.exists()


def test_spans_from_any_month_get_a_partition(api, deferred):
    years = [1_500_000_000, 1_600_000_000, 1_700_000_000]  # 2017, 2020, 2023
    post(api, body([span(f"y{i}", start_s=start) for i, start in enumerate(years)]))
    process_pending()
    assert Span.objects.count() == 3
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'traces_span'::regclass AND inhrelid::regclass::text = ANY(%s)",
            [["traces_span_2017_07", "traces_span_2020_09", "traces_span_2023_11"]],
        )
        assert cursor.fetchone()[0] == 3


def test_long_prompts_are_compressed_with_lz4_in_this_month_and_in_a_new_one(api, deferred):
    # Migration 0011: PostgreSQL compresses rows past ~2 KB, and lz4 costs a
    # third of its default (pglz). This month's partition existed when the
    # migration ran; 2017's is made on demand and must take the parent's.
    prompt = " ".join(f"{n:x}: plan the refund for order {n}" for n in range(1500))
    post(api, body([span("now", user_message=prompt), span("2017", user_message=prompt, start_s=1_500_000_000)]))
    process_pending()
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text, pg_column_compression(prompt), prompt -> 0 ->> 'content' = %s FROM traces_span", [prompt])
        stored = sorted(cursor.fetchall())
    assert [compression for _, compression, _ in stored] == ["lz4", "lz4"]
    assert all(intact for _, _, intact in stored)
    assert stored[0][0] == "traces_span_2017_07" and stored[1][0] != stored[0][0]


# -- a worker that dies ------------------------------------------------------------


def _database_url():
    db = settings.DATABASES["default"]
    return f"postgresql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def _start_worker(subprocess_env):
    """`manage.py process_trace_batches`, returned once it says it is working (its signal handlers set)."""
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "process_trace_batches", "--every", "0.1"],
        cwd=REPO,
        env=subprocess_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert "Storing trace batches" in worker.stdout.readline()
    return worker


def _waiting_on_a_lock(conn, pid_of_holder) -> bool:
    rows = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND %s = ANY(pg_blocking_pids(pid))",
        [pid_of_holder],
    ).fetchone()
    return rows[0] == 1


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_batch_loses_nothing_and_the_next_stores_it_once(api, subprocess_env, deferred):
    post(api, body([span("first", session_id="held")]))
    process_pending()
    spans = [span(f"late-{i}", session_id="held", tokens=(1, 1)) for i in range(200)]
    post(api, body(spans))

    with psycopg.connect(_database_url()) as holder, psycopg.connect(_database_url(), autocommit=True) as observer:
        # Holding the session's row, the worker stops inside the batch: its
        # spans copied, the session upsert waiting, nothing committed.
        holder.execute("SELECT 1 FROM traces_tracesession WHERE session_id = 'held' FOR UPDATE")
        holder_pid = holder.info.backend_pid
        worker = _start_worker(subprocess_env)
        try:
            wait_for(lambda: _waiting_on_a_lock(observer, holder_pid), timeout=30)
            # The batch is claimed: another worker would skip it.
            assert observer.execute("SELECT id FROM traces_tracebatch FOR UPDATE SKIP LOCKED").fetchall() == []
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
        finally:
            worker.kill()
        holder.rollback()
        assert observer.execute("SELECT count(*) FROM traces_tracebatch").fetchone()[0] == 1
        assert observer.execute("SELECT count(*) FROM traces_span WHERE name LIKE 'late-%%'").fetchone()[0] == 0

    worker = _start_worker(subprocess_env)
    try:
        wait_for(lambda: not TraceBatch.objects.exists(), timeout=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(15) == 0
    assert Span.objects.filter(name__startswith="late-").count() == 200
    session = TraceSession.objects.get(session_id="held")
    assert (session.span_count, session.input_tokens) == (201, 200)


@pytest.mark.django_db(transaction=True)
def test_a_batch_of_a_project_being_deleted_is_left_to_go_with_it_and_others_go_on(api, project, outsider_api, outsider_project, deferred):
    post(api, body([span("late", session_id="s")]))
    post(outsider_api, body([span("elsewhere", session_id="s")]))
    with psycopg.connect(_database_url()) as deleter:
        # What deleting the project holds first (traces.batches.lock_out).
        deleter.execute("SELECT 1 FROM core_project WHERE id = %s FOR UPDATE", [project.pk])
        # The older batch is skipped, not waited on: the other project's is stored.
        assert drain() == 1
        assert list(Span.objects.values_list("name", flat=True)) == ["elsewhere"]
        assert TraceBatch.objects.get().project == project
        deleter.rollback()
    assert process_pending() == 1 and Span.objects.filter(project=project).count() == 1


@pytest.mark.django_db(transaction=True)
def test_starting_work_in_a_project_does_not_hold_up_its_spans(api, project, deferred):
    post(api, body([span("stored meanwhile", session_id="s")]))
    with psycopg.connect(_database_url()) as starter:
        # What starting a run or an eval holds while it counts the project's active work (Project.lock).
        starter.execute("SELECT 1 FROM core_project WHERE id = %s FOR NO KEY UPDATE", [project.pk])
        assert process_pending() == 1


@pytest.mark.django_db(transaction=True)
def test_ingest_into_a_project_being_deleted_answers_503_without_holding_a_worker(api, project, deferred):
    with psycopg.connect(_database_url()) as deleter:
        deleter.execute("SELECT 1 FROM core_project WHERE id = %s FOR UPDATE", [project.pk])
        # Should the request wait for the lock after all, this ends the wait (and the test fails on time).
        release = threading.Timer(10, deleter.rollback)
        release.start()
        started = time.monotonic()
        response = post(api, body([span("too late", session_id="s")]))
        elapsed = time.monotonic() - started
        release.cancel()
        assert response.status_code == 503 and response["Retry-After"]
        assert elapsed < 5
        deleter.rollback()
    assert not TraceBatch.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_deleting_a_project_waits_for_the_batch_being_stored_and_leaves_no_span_behind(api, project, deferred, monkeypatch):
    from traces import batches
    from workspace.actions import delete_project

    # Spans of no session: nothing but the batch itself ties the worker to the deletion.
    post(api, body([span(f"late-{i}") for i in range(50)]))
    copied, resume, done = threading.Event(), threading.Event(), []
    store_spans = batches.store_spans

    def store_then_pause(*args, **kwargs):
        stored = store_spans(*args, **kwargs)
        copied.set()  # spans copied, nothing committed
        resume.wait(30)
        return stored

    def in_thread(work):
        def run():
            try:
                done.append(work())
            finally:
                connection.close()

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    monkeypatch.setattr(batches, "store_spans", store_then_pause)
    worker = in_thread(process_pending)
    with psycopg.connect(_database_url(), autocommit=True) as observer:
        try:
            assert copied.wait(30)
            deleting = in_thread(lambda: delete_project(project))
            wait_for(
                lambda: (
                    observer.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").fetchone()[0] == 1
                ),
                timeout=30,
            )
        finally:
            resume.set()  # never leave the worker holding its locks
        worker.join(30)
        deleting.join(30)
        assert sorted(done, key=str) == [1, None]  # the worker stored its batch; the deletion returned
        # No foreign key refuses orphans: nothing of the project may be left.
        for table, column in [("traces_span", "project_id"), ("traces_tracebatch", "project_id"), ("core_project", "id")]:
            assert observer.execute(f"SELECT count(*) FROM {table} WHERE {column} = %s", [project.pk]).fetchone()[0] == 0, table


@pytest.mark.django_db(transaction=True)
def test_two_workers_share_the_batches_and_store_each_once(api, subprocess_env, deferred):
    for n in range(12):
        post(api, body([span(f"b{n}-{i}", session_id=f"s{n % 3}") for i in range(50)]))
    workers = [_start_worker(subprocess_env) for _ in range(2)]
    try:
        wait_for(lambda: not TraceBatch.objects.exists(), timeout=60)
        # Each says it is alive, and how fast they store together (ingest's push-back divides by it).
        wait_for(lambda: BatchProcessor.objects.count() == 2, timeout=30)
        assert BatchProcessor.objects.filter(spans_per_second__gt=0).exists()
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        assert [worker.wait(15) for worker in workers] == [0, 0]
    assert Span.objects.count() == 600
    assert not BatchProcessor.objects.exists()  # stopped, they are no longer counted on
    assert sorted(TraceSession.objects.values_list("span_count", flat=True)) == [200, 200, 200]


@pytest.mark.django_db(transaction=True)
def test_an_idle_worker_starts_on_a_batch_as_it_is_accepted(api, subprocess_env, deferred):
    # It looks for batches only once a minute: what wakes it is the batch's announcement.
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "process_trace_batches", "--every", "60"],
        cwd=REPO,
        env=subprocess_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert "Storing trace batches" in worker.stdout.readline()
        wait_for(_listening, timeout=30, interval=0.05)
        started = time.monotonic()
        post(api, body([span("woken", session_id="s")]))
        wait_for(lambda: Span.objects.filter(name="woken").exists(), timeout=30, interval=0.02)
        assert time.monotonic() - started < 5
    finally:
        worker.send_signal(signal.SIGTERM)
        started = time.monotonic()
        # SIGTERM ends its wait for the next batch too, not after a minute.
        assert worker.wait(15) == 0 and time.monotonic() - started < 5


def _listening() -> bool:
    """Whether a worker waits on the announcements of accepted batches (its last statement, LISTEN)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN trace_batches' AND state = 'idle'")
        return cursor.fetchone()[0] >= 1
