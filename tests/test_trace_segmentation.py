from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from traces.models import Span, Task, TaskGroup, TraceSession
from traces.segmentation import process_quiet_sessions, segment, signature

from .concurrency import start_thread
from .otlp_builders import body, new_id, span

pytestmark = pytest.mark.django_db


def send(api, spans):
    response = api.generic("POST", "/api/v1/traces", body(spans), content_type="application/json")
    assert response.status_code == 200


def workflow(session_id, name, start_s, children=1):
    trace = new_id(32)
    root = span(f"{name}.workflow", session_id=session_id, trace_id=trace, kind="workflow", start_s=start_s, duration_s=5)
    kids = [
        span("openai.chat", session_id=session_id, trace_id=trace, parent=root["spanId"], start_s=start_s + i + 0.1, user_message=f"do {name} #{i}")
        for i in range(children)
    ]
    return [root, *kids]


def test_quiet_sessions_become_tasks_and_groups(api, project, settings):
    settings.TRACE_QUIET_SECONDS = 30
    settings.TRACE_TASK_IDLE_GAP_SECONDS = 60  # the loose calls at +21 s and +500 s are two tasks, whatever the environment says
    base = timezone.now().timestamp()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        send(api, workflow("s1", "send_email", base, children=2) + workflow("s1", "book_flight", base + 10))
        # Loose LLM calls: two close together, one after a long idle gap.
        send(
            api,
            [
                span("chat", session_id="s1", start_s=base + 20, user_message="What is the weather in Paris today?"),
                span("chat", session_id="s1", start_s=base + 21, user_message="and tomorrow?"),
                span("chat", session_id="s1", start_s=base + 500, user_message="What is the weather in Rome today?"),
            ],
        )
        assert process_quiet_sessions() == 0  # not quiet yet
        clock.shift(timedelta(seconds=31))
        assert process_quiet_sessions() == 1
    tasks = Task.objects.filter(session__session_id="s1").order_by("started_at")
    # Two workflows (each with its child calls), then the loose calls split at the idle gap.
    assert [(t.name, t.span_count, t.key.split(":")[0]) for t in tasks] == [
        ("send_email", 3, "wf"),
        ("book_flight", 2, "wf"),
        ("chat", 2, "gap"),
        ("chat", 1, "gap"),
    ]
    assert Task.objects.count() == 4
    email = Task.objects.get(name="send_email")
    assert email.span_count == 3 and email.group.name == "send_email"
    gap_tasks = Task.objects.filter(key__startswith="gap:").order_by("started_at")
    assert [t.span_count for t in gap_tasks] == [2, 1]
    # Similar first user messages share a group, deterministically.
    assert gap_tasks[0].group == gap_tasks[1].group
    assert signature("What is the weather in Paris today?") == "what is the weather in"
    session = TraceSession.objects.get(session_id="s1")
    assert not session.needs_processing and session.span_count == 8


def test_late_spans_reopen_and_resegment_without_duplicates(api, project, settings):
    base = timezone.now().timestamp()
    first = workflow("s2", "triage", base)
    with time_machine.travel(timezone.now(), tick=False) as clock:
        send(api, first)
        clock.shift(timedelta(seconds=31))
        process_quiet_sessions()
        assert Task.objects.get().span_count == 2
        late = span("tool.call", session_id="s2", trace_id=first[0]["traceId"], parent=first[0]["spanId"], start_s=base + 3, kind="tool")
        send(api, [late])
        assert TraceSession.objects.get().needs_processing
        clock.shift(timedelta(seconds=31))
        process_quiet_sessions()
    assert Task.objects.count() == 1
    assert Task.objects.get().span_count == 3
    assert TaskGroup.objects.count() == 1


def test_a_failed_outcome_excludes_tasks_from_training(api, project):
    base = timezone.now().timestamp()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        send(api, workflow("s3", "refund", base))
        clock.shift(timedelta(seconds=31))
        process_quiet_sessions()
    api.post("/api/v1/outcomes", {"session_id": "s3", "outcome": "fail"}, format="json")
    assert Task.objects.get().excluded_from_training
    api.post("/api/v1/outcomes", {"session_id": "s3", "outcome": "success"}, format="json")
    assert not Task.objects.get().excluded_from_training
    groups = api.get("/api/v1/task-groups").json()
    assert groups == [{"id": groups[0]["id"], "key": groups[0]["key"], "name": "refund", "task_count": 1, "success_rate": 1.0}]


def test_pages_show_sessions_waterfall_and_groups(api, owner_client, outsider_client, project, settings):
    settings.TRACE_QUIET_SECONDS = 30
    base = timezone.now().timestamp()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        send(api, workflow("page-session", "summarise", base))
        assert "once it has been quiet for 30 s" in owner_client.get("/traces/sessions/page-session/").content.decode()
        clock.shift(timedelta(seconds=31))
        process_quiet_sessions()
        assert "tasks are updated once" not in owner_client.get("/traces/sessions/page-session/").content.decode()
        send(api, [span("late", session_id="page-session", start_s=base + 2)])
        assert "New spans since the last segmentation" in owner_client.get("/traces/sessions/page-session/").content.decode()
        clock.shift(timedelta(seconds=31))
        process_quiet_sessions()
    listing = owner_client.get("/traces/").content.decode()
    assert "page-session" in listing
    assert owner_client.get("/traces/?outcome=fail").content.decode().count("page-session") == 0
    detail = owner_client.get("/traces/sessions/page-session/").content.decode()
    assert "summarise.workflow" in detail and "do summarise #0" in detail and "span-bar" in detail
    assert "summarise" in owner_client.get("/traces/groups/").content.decode()
    assert outsider_client.get("/traces/sessions/page-session/").status_code == 404
    body = api.get("/api/v1/sessions/page-session").json()
    assert len(body["spans"]) == 3 and body["tasks"][0]["name"] == "summarise"


def test_sessions_list_pages_without_counting(api, owner_client, project):
    base = timezone.now().timestamp()
    send(api, [span("x", session_id=f"many-{i:03d}", start_s=base + i) for i in range(60)])
    first = owner_client.get("/traces/").content.decode()
    assert "many-059" in first and "many-009" not in first and "Older sessions" in first
    older_link = first.split('href="?before=')[1].split('"')[0]
    from urllib.parse import unquote

    second = owner_client.get("/traces/", {"before": unquote(older_link)}).content.decode()
    assert "many-009" in second and "many-059" not in second
    # A cursor that is no time at all, or an impossible one (a 500 before), is the first page.
    for cursor in ("yesterday", "2026-13-45T00:00:00"):
        response = owner_client.get("/traces/", {"before": cursor})
        assert response.status_code == 200 and "many-059" in response.content.decode(), cursor


@pytest.mark.django_db(transaction=True)
def test_the_segmenter_process_picks_up_quiet_sessions_within_seconds(api, project, subprocess_env):
    import signal
    import subprocess
    import sys
    import time

    from .harness_fixtures import wait_for

    env = {**subprocess_env, "BELVEDIR_TRACE_QUIET_SECONDS": "1"}
    segmenter = subprocess.Popen(
        [sys.executable, "manage.py", "segment_sessions", "--every", "0.5"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        # Its first line says it is up: the clock below starts then, not while Django is still importing
        # (on a loaded machine that took seconds and made the segmenter look late).
        started = segmenter.stdout.readline()
        while started and "Segmenting sessions" not in started:  # a warning printed before it
            started = segmenter.stdout.readline()
        base = time.time()
        send(api, workflow("live", "triage", base))
        sent = time.monotonic()
        wait_for(lambda: Task.objects.filter(session__session_id="live").exists(), timeout=30, interval=0.1)
        # Quiet for 1 s, looked at every 0.5 s: segmented a few seconds after the last span, not a minute.
        assert time.monotonic() - sent < 6
        # A late span re-opens the session; the next pass segments it again, without duplicates.
        send(api, workflow("live", "escalate", base + 3))
        wait_for(lambda: Task.objects.filter(session__session_id="live").count() == 2, timeout=30, interval=0.1)
        wait_for(lambda: not TraceSession.objects.get(session_id="live").needs_processing, timeout=30, interval=0.1)
        assert sorted(Task.objects.values_list("name", flat=True)) == ["escalate", "triage"]
    finally:
        segmenter.send_signal(signal.SIGTERM)
        output, _ = segmenter.communicate(timeout=15)
    assert segmenter.returncode == 0, started + output
    assert "every 0.5 s" in started


@pytest.mark.django_db(transaction=True)
def test_overlapping_segmenters_skip_a_session_the_other_holds(api, project, settings):
    from django.db import transaction

    from traces.segmentation import drain_quiet_sessions

    settings.TRACE_QUIET_SECONDS = 30
    base = timezone.now().timestamp()
    send(api, workflow("held", "a", base) + workflow("free", "b", base))

    with time_machine.travel(timezone.now() + timedelta(seconds=31), tick=False):
        with transaction.atomic():
            TraceSession.objects.select_for_update().get(session_id="held")
            other_segmenter = start_thread(drain_quiet_sessions)
            other_segmenter.join(10)
        # The other skipped "held" instead of waiting for it, and did "free".
        assert other_segmenter.result == 1
        assert list(Task.objects.values_list("session__session_id", flat=True)) == ["free"]
        assert drain_quiet_sessions() == 1
    assert TraceSession.objects.filter(needs_processing=True).count() == 0


def test_a_tool_spans_input_is_neither_an_llm_call_nor_the_users_prompt(api, project):
    base = timezone.now().timestamp()
    tool = span("get_weather.tool", session_id="s-tool", kind="tool", start_s=base, attributes={"traceloop.entity.input": '{"args": ["Oslo"], "kwargs": {}}'})
    llm = span("chat", session_id="s-tool", start_s=base + 1, user_message="Weather in Oslo?")
    send(api, [tool, llm])
    segment(TraceSession.objects.get(session_id="s-tool"))
    stored_tool = Span.objects.get(name="get_weather.tool")
    assert stored_tool.prompt == [{"role": "input", "content": '{"args": ["Oslo"], "kwargs": {}}'}]
    task = Task.objects.get(session__session_id="s-tool")
    assert (task.span_count, task.first_user_message) == (1, "Weather in Oslo?")
