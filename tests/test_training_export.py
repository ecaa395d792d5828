"""Training data out: task groups as OpenAI chat fine-tuning JSONL."""

import json
import tracemalloc
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from evals import contamination
from traces.models import Span, Task, TaskGroup, TraceSession
from traces.segmentation import process_quiet_sessions
from traces.training import CANARY_QUESTION, CHUNK, conversation, jsonl_lines, training_tasks

from .otlp_builders import body, new_id, span

pytestmark = pytest.mark.django_db


def messages_attrs(side, messages):
    attrs = {}
    for i, (role, content) in enumerate(messages):
        attrs[f"gen_ai.{side}.{i}.role"] = role
        attrs[f"gen_ai.{side}.{i}.content"] = content
    return attrs


def support_session(session_id, question, start_s):
    """One workflow task, two LLM calls; the second resends the history, as agents do."""
    trace = new_id(32)
    root = span("support.workflow", session_id=session_id, trace_id=trace, kind="workflow", start_s=start_s, duration_s=5)
    first = [("system", "You are support."), ("user", question)]
    answer = [("assistant", f"Let me look at {question}")]
    second = [*first, *answer, ("user", "thanks, and then?")]
    calls = [
        span(
            "openai.chat",
            session_id=session_id,
            trace_id=trace,
            parent=root["spanId"],
            start_s=start_s + 1,
            attributes={**messages_attrs("prompt", first), **messages_attrs("completion", answer)},
        ),
        span(
            "openai.chat",
            session_id=session_id,
            trace_id=trace,
            parent=root["spanId"],
            start_s=start_s + 2,
            attributes={**messages_attrs("prompt", second), **messages_attrs("completion", [("assistant", "Then it ships.")])},
        ),
    ]
    return [root, *calls]


@pytest.fixture
def group(api, project):
    base = timezone.now().timestamp()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        spans = support_session("ok", "order 1", base) + support_session("bad", "order 2", base + 10) + support_session("unjudged", "order 3", base + 20)
        assert api.generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200
        clock.shift(timedelta(seconds=31))
        process_quiet_sessions()
    api.post("/api/v1/outcomes", {"session_id": "ok", "outcome": "success"}, format="json")
    api.post("/api/v1/outcomes", {"session_id": "bad", "outcome": "fail"}, format="json")
    return TaskGroup.objects.get(name="support")


EXPECTED = [
    {"role": "system", "content": "You are support."},
    {"role": "user", "content": "order {n}"},
    {"role": "assistant", "content": "Let me look at order {n}"},
    {"role": "user", "content": "thanks, and then?"},
    {"role": "assistant", "content": "Then it ships."},
]


def expected(n):
    return {"messages": [{**m, "content": m["content"].format(n=n)} for m in EXPECTED]}


def all_lines(response):
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


def lines(response):
    """The training lines of an export, its last line checked to be the canary line and set aside."""
    *examples, canary = all_lines(response)
    assert canary["messages"][0] == {"role": "user", "content": CANARY_QUESTION} and "belvedir_canary" in canary["metadata"]
    return examples


def test_it_exports_success_and_unjudged_tasks_but_not_failed_ones_with_messages_in_order(api, group):
    response = api.get(f"/api/v1/task-groups/{group.pk}/training-data")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/jsonl")
    assert response.streaming
    assert lines(response) == [expected(1), expected(3)]


def test_a_clean_export_is_unchanged_apart_from_the_canary_line(api, group):
    # The lines before it are exactly the conversations, with no key added; the canary line counts them and found nothing.
    *examples, canary = all_lines(api.get(f"/api/v1/task-groups/{group.pk}/training-data"))
    assert examples == [expected(1), expected(3)]
    check = canary["metadata"]["benchmark_check"]
    assert canary["metadata"]["lines"] == 2 and check["left_out"] == 0 and check["included_marked"] == 0 and check["left_out_by_benchmark"] == {}


def test_a_late_fail_report_removes_a_task_from_the_export(api, group):
    api.post("/api/v1/outcomes", {"session_id": "ok", "outcome": "fail"}, format="json")
    assert lines(api.get(f"/api/v1/task-groups/{group.pk}/training-data")) == [expected(3)]


def test_the_date_range_filters_by_task_start(api, group):
    Task.objects.filter(session__session_id="unjudged").update(started_at=timezone.now() - timedelta(days=10))
    url = f"/api/v1/task-groups/{group.pk}/training-data"
    assert lines(api.get(url, {"since": (timezone.now() - timedelta(days=1)).date().isoformat()})) == [expected(1)]
    assert lines(api.get(url, {"until": (timezone.now() - timedelta(days=5)).date().isoformat()})) == [expected(3)]
    assert api.get(url, {"since": "last tuesday"}).status_code == 400
    # Well formed but no such day or time: Django's parsers raise on these (a 500 before).
    for impossible in ("2026-13-45", "2026-02-30", "2026-01-01T25:00:00"):
        response = api.get(url, {"until": impossible})
        assert response.status_code == 400 and "is not a date" in response.json()["detail"], impossible


def test_the_groups_page_has_an_export_button_and_download(owner_client, group):
    page = owner_client.get("/traces/groups/").content.decode()
    assert f'action="/traces/groups/{group.pk}/training-data.jsonl"' in page and "Export JSONL" in page
    response = owner_client.get(f"/traces/groups/{group.pk}/training-data.jsonl", {"since": "2020-01-01"})
    assert response["Content-Disposition"] == f'attachment; filename="group-{group.pk}-from-20200101.jsonl"'
    assert lines(response) == [expected(1), expected(3)]


def test_another_projects_group_is_not_found(outsider_api, outsider_client, group):
    assert outsider_api.get(f"/api/v1/task-groups/{group.pk}/training-data").status_code == 404
    assert outsider_client.get(f"/traces/groups/{group.pk}/training-data.jsonl").status_code == 404


def test_a_fresh_context_adds_only_what_was_not_said():
    calls = [
        ([{"role": "user", "content": "a"}], [{"role": "assistant", "content": "b"}]),
        ([{"role": "system", "content": "s"}, {"role": "user", "content": "a"}], [{"role": "assistant", "content": "c"}]),
    ]
    assert [m["content"] for m in conversation(calls)] == ["a", "b", "s", "c"]


def many_tasks(project, group, count):
    session = TraceSession.objects.create(project=project, session_id=f"bulk-{count}", first_span_at=timezone.now(), last_span_at=timezone.now())
    now = timezone.now()
    tasks = Task.objects.bulk_create(
        Task(project=project, session=session, group=group, key=f"k{i}", name="t", started_at=now, ended_at=now) for i in range(count)
    )
    Span.objects.bulk_create(
        Span(
            project=project,
            trace_id="ab" * 16,
            span_id=f"{count:04x}{i:012x}",
            name="chat",
            start_time=now,
            end_time=now,
            start_unix_nano=i,
            end_unix_nano=i,
            latency_ms=1,
            task=task,
            prompt=[{"role": "user", "content": "q" * 200}],
            completion=[{"role": "assistant", "content": "a" * 200}],
        )
        for i, task in enumerate(tasks)
    )


def peak_bytes(group, tasks, index):
    tracemalloc.start()
    try:
        count = sum(chunk.count("\n") for chunk in jsonl_lines(group, tasks, index))
        return count, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_as_the_group_grows(project):
    small, large = (TaskGroup.objects.create(project=project, key=k, name=k) for k in ("small", "large"))
    many_tasks(project, small, CHUNK)
    many_tasks(project, large, 8 * CHUNK)
    # Opened before measuring, as a process does once: memory-mapped, outside Python's heap either way.
    index = contamination.current()
    small_count, small_peak = peak_bytes(small, training_tasks(project, small), index)
    large_count, large_peak = peak_bytes(large, training_tasks(project, large), index)
    # Each task's line, and the canary line.
    assert (small_count, large_count) == (CHUNK + 1, 8 * CHUNK + 1)
    # Eight times the tasks, about the same memory: one chunk at a time, benchmark check included.
    assert large_peak < 1.5 * small_peak, (small_peak, large_peak)


def test_a_bare_date_bounds_the_whole_day_and_a_time_is_taken_as_given():
    from datetime import UTC, datetime

    from traces.training import BadFilter, parse_bound

    assert parse_bound("2026-12-01", end=False) == datetime(2026, 12, 1, tzinfo=UTC)
    # "until 2026-12-01" holds that day's evening (parse_datetime alone reads the date as midnight, and cut it off).
    assert parse_bound("2026-12-01", end=True) == datetime(2026, 12, 1, 23, 59, 59, 999999, tzinfo=UTC)
    assert parse_bound("2026-12-01T09:30:00Z", end=True) == datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    with pytest.raises(BadFilter):
        parse_bound("2026-02-30", end=False)
