"""A session's trajectory: its steps on the page, in the steps API, filtered and paged; a harness run's step summary."""

import json
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evals.models import Deployment
from harnesses.models import Harness, Run
from traces.models import Span, TraceSession

from .otlp_builders import body, new_id, span

pytestmark = pytest.mark.django_db

QUESTION = "What is the weather in Oslo?"
LONG_RESULT = "Snow, -4. " * 500


def post(client, spans):
    response = client.generic("POST", "/api/v1/traces", body(spans), content_type="application/json")
    assert response.status_code == 200, response.content


def llm_span(session_id, start_s, *, answer="Let me check.", call_arguments='{"city": "Oslo"}', model="gpt-4o", **extra):
    output = [{"type": "text", "content": answer}]
    if call_arguments is not None:
        output.append({"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": json.loads(call_arguments)})
    return span(
        "openai.chat",
        session_id=session_id,
        start_s=start_s,
        model=model,
        tokens=(120, 30),
        attributes={
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "You are a weather agent."}]),
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": output}]),
        },
        **extra,
    )


def tool_span(session_id, start_s, *, name="get_weather", arguments='{"city": "Oslo"}', result="Snow, -4"):
    return span(
        f"{name}.tool",
        session_id=session_id,
        start_s=start_s,
        kind="tool",
        attributes={"traceloop.entity.name": name, "traceloop.entity.input": arguments, "traceloop.entity.output": result},
    )


def failed(encoded, message="rate limited"):
    encoded["status"] = {"code": 2, "message": message}
    encoded["events"] = [
        {
            "name": "exception",
            "timeUnixNano": encoded["startTimeUnixNano"],
            "attributes": [{"key": "exception.type", "value": {"stringValue": "RateLimitError"}}],
        }
    ]
    return encoded


def agent_session(session_id="agent-1", start_s=1_700_000_000.0, *, result="Snow, -4"):
    """An LLM call that asks for a tool, the tool, a failed LLM call, and the final answer."""
    return [
        llm_span(session_id, start_s),
        tool_span(session_id, start_s + 1, result=result),
        failed(llm_span(session_id, start_s + 2, answer="", call_arguments=None)),
        llm_span(session_id, start_s + 3, answer="It is snowing in Oslo.", call_arguments=None),
    ]


def steps(api, session_id, **params):
    response = api.get(f"/api/v1/sessions/{session_id}/steps", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_it_shows_each_step_in_order_with_messages_tool_calls_tokens_cost_and_errors(api, project, owner_client):
    Deployment.objects.create(
        project=project,
        name="gpt",
        base_url="https://203.0.113.9/v1",
        model="gpt-4o",
        input_price_per_million=Decimal("2.5"),
        output_price_per_million=Decimal("10"),
    )
    post(api, agent_session(result=LONG_RESULT))
    page = owner_client.get("/traces/sessions/agent-1/").content.decode()
    assert "<strong>4</strong> steps · <strong>3</strong> LLM calls · <strong>1</strong> tool call" in page
    for text in ("You are a weather agent.", QUESTION, "Let me check.", "Tool call <strong>get_weather</strong>", "It is snowing in Oslo.", "gpt-4o"):
        assert text in page
    assert page.index("#1</span>") < page.index("#2</span>") < page.index("#3</span>") < page.index("#4</span>")
    assert "120 in / 30 out tokens" in page and "$0.000600" in page  # 120 × 2.5 + 30 × 10 per million
    assert "Error: rate limited" in page and "1 error" in page
    # The tool step: its arguments and result; the 5,000-character result folded, its length shown.
    assert "<strong>get_weather</strong>" in page and "{&quot;city&quot;: &quot;Oslo&quot;}" in page
    assert f"{len(LONG_RESULT)} characters, folded" in page
    # Expanding a step shows its span's attributes and events.
    assert "Span attributes and events" in page and "RateLimitError" in page and "gen_ai.request.model" in page

    body = steps(api, "agent-1")
    assert [(s["number"], s["kind"]) for s in body["steps"]] == [(1, "llm"), (2, "tool"), (3, "llm"), (4, "llm")]
    first, tool, error = body["steps"][:3]
    assert first["prompt"] == [{"role": "system", "content": "You are a weather agent."}, {"role": "user", "content": QUESTION}]
    assert first["completion"][0]["tool_calls"] == [{"id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'}]
    assert (first["model"], first["input_tokens"], first["output_tokens"], first["cost"]) == ("gpt-4o", 120, 30, "0.000600")
    assert (tool["tool"], tool["arguments"], tool["result"]) == ("get_weather", '{"city": "Oslo"}', LONG_RESULT)
    assert error["error"] and error["status_message"] == "rate limited" and error["events"][0]["name"] == "exception"
    summary = body["summary"]
    assert (summary["steps"], summary["llm_calls"], summary["tool_calls"], summary["errors"], summary["tokens"]) == (4, 3, 1, 1, 450)
    assert summary["cost"] == "0.001800" and body["next"] is None


def test_it_filters_by_step_kind_task_errors_and_a_search(api, owner_client):
    post(api, agent_session())
    assert [s["kind"] for s in steps(api, "agent-1", kind="tool")["steps"]] == ["tool"]
    assert [s["number"] for s in steps(api, "agent-1", kind="llm")["steps"]] == [1, 2, 3]
    assert [s["status_message"] for s in steps(api, "agent-1", errors="1")["steps"]] == ["rate limited"]
    assert [s["completion"][0]["content"] for s in steps(api, "agent-1", q="SNOWING")["steps"]] == ["It is snowing in Oslo."]
    assert steps(api, "agent-1", q="nothing like it")["steps"] == []
    # The text is searched as it is: a regular expression's characters match only themselves.
    assert [s["completion"][0]["content"] for s in steps(api, "agent-1", q="in oslo.")["steps"]] == ["It is snowing in Oslo."]
    for literal in ("in Osl.", "snowing.*Oslo", "Oslo (", "[a-z]"):
        assert steps(api, "agent-1", q=literal)["steps"] == [], literal
    session = TraceSession.objects.get(session_id="agent-1")
    task = session.tasks.create(project=session.project, key="k", name="only the tool", started_at=session.first_span_at, ended_at=session.last_span_at)
    Span.objects.filter(session_id="agent-1", span_kind="tool").update(task=task)
    assert [s["tool"] for s in steps(api, "agent-1", task=str(task.pk))["steps"]] == ["get_weather"]
    page = owner_client.get("/traces/sessions/agent-1/", {"errors": "1"}).content.decode()
    assert "Error: rate limited" in page and "It is snowing in Oslo." not in page
    assert "No step matches these filters." in owner_client.get("/traces/sessions/agent-1/", {"q": "zebra"}).content.decode()
    # A filter that is not one is refused, not ignored.
    assert api.get("/api/v1/sessions/agent-1/steps", {"kind": "banana"}).status_code == 400
    assert api.get("/api/v1/sessions/agent-1/steps", {"after": "garbage"}).status_code == 400
    assert owner_client.get("/traces/sessions/agent-1/", {"task": "x"}).status_code == 400


def many_spans(session_id, count):
    return [span(f"step-{i}", session_id=session_id, start_s=1_700_000_000 + i, user_message=f"message {i}") for i in range(count)]


def test_it_pages_steps_with_a_cursor_and_loads_more_with_htmx_or_a_link(api, owner_client):
    post(api, many_spans("long", 120))
    first = steps(api, "long")
    assert [s["number"] for s in first["steps"]] == list(range(1, 51))
    second = api.get(first["next"]).json()
    assert [s["name"] for s in second["steps"]] == [f"step-{i}" for i in range(50, 100)] and second["steps"][0]["number"] == 51
    third = api.get(second["next"]).json()
    assert [s["number"] for s in third["steps"]] == list(range(101, 121)) and third["next"] is None
    assert len(steps(api, "long", page_size="120")["steps"]) == 120
    page = owner_client.get("/traces/sessions/long/").content.decode()
    assert "message 49" in page and "message 50<" not in page and "Load more steps" in page
    href = page.split('id="load-more"><a href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    more = owner_client.get(href, headers={"HX-Request": "true"}).content.decode()
    assert "<h1>" not in more and "#51</span>" in more and "message 99" in more and "Load more steps" in more
    # Without JavaScript the same link is a whole page.
    assert "<h1>" in owner_client.get(href).content.decode()


def test_the_steps_page_and_api_cost_the_same_queries_for_5_steps_or_120(api, owner_client, django_assert_num_queries):
    post(api, many_spans("short", 5))
    post(api, many_spans("long", 120))

    def counted(url):
        with CaptureQueriesContext(connection) as queries:
            assert owner_client.get(url).status_code == 200
        return len(queries)

    page_queries = counted("/traces/sessions/short/")
    api_queries = counted("/api/v1/sessions/short/steps")
    with django_assert_num_queries(page_queries):
        owner_client.get("/traces/sessions/long/")
    with django_assert_num_queries(api_queries):
        owner_client.get("/api/v1/sessions/long/steps")
    # Session, steps (with their tasks), tasks, summary, prices, evaluator scores, the review queues its "add to review
    # queue" form offers: plus the login and project lookups.
    assert page_queries <= 11


def test_another_projects_session_is_404_on_the_page_the_api_and_the_diff(api, outsider_api, outsider_client):
    post(api, agent_session("mine"))
    post(outsider_api, agent_session("theirs"))
    assert outsider_client.get("/traces/sessions/mine/").status_code == 404
    assert outsider_api.get("/api/v1/sessions/mine/steps").status_code == 404
    assert outsider_api.get("/api/v1/session-diff", {"a": "theirs", "b": "mine"}).status_code == 404
    assert outsider_client.get("/traces/diff/", {"s": ["theirs", "mine"]}).status_code == 404
    assert outsider_api.get("/api/v1/session-diff", {"a": "theirs", "b": "theirs"}).status_code == 200


def test_spans_whose_messages_are_malformed_show_the_raw_attribute(api, project, owner_client):
    broken = span("openai.chat", session_id="broken", model="gpt-4o", attributes={"gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "te'})
    post(api, [broken])
    stored = Span.objects.get(session_id="broken")
    # Stored by an older ingest, in a shape today's does not write.
    odd = Span.objects.create(
        project=project, trace_id=new_id(32), span_id=new_id(16), name="legacy", start_time=stored.start_time, end_time=stored.end_time,
        start_unix_nano=stored.start_unix_nano + 1, end_unix_nano=stored.end_unix_nano, session_id="broken", latency_ms=1.0,
        prompt=["just a string", 7], completion={"not": "a list"}, model="gpt-4o",
    )  # fmt: skip
    page = owner_client.get("/traces/sessions/broken/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Messages in <code>gen_ai.input.messages</code> could not be read" in text
    assert "[{&quot;role&quot;: &quot;user&quot;, &quot;parts&quot;: [{&quot;type&quot;: &quot;te" in text
    assert "Messages in <code>prompt</code> could not be read" in text and "just a string" in text
    # Two generations on one span: the first read, the second kept but not unreadable.
    both = span("openai.chat", session_id="broken", user_message="hi", start_s=stored.start_unix_nano / 1e9 + 1, attributes={"gen_ai.input.messages": "[]"})
    post(api, [both])
    raw = [s["raw_messages"] for s in steps(api, "broken")["steps"]]
    assert raw[0] == {"gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "te'}
    assert set(raw[1]) == {"prompt", "completion"} and odd.name == "legacy"
    assert raw[2] == {} and Span.objects.get(span_id=both["spanId"]).attributes["gen_ai.input.messages"] == "[]"


def test_a_session_without_llm_spans_shows_its_spans_plainly(api, owner_client):
    root = span("nightly.workflow", session_id="plain", kind="workflow", start_s=1_700_000_000)
    child = span("GET /health", session_id="plain", kind=None, parent=root["spanId"], start_s=1_700_000_001)
    post(api, [root, child])
    page = owner_client.get("/traces/sessions/plain/").content.decode()
    assert "nightly.workflow" in page and "GET /health" in page
    assert "<strong>0</strong> LLM calls · <strong>0</strong> tool calls" in page
    assert [(s["kind"], s["name"]) for s in steps(api, "plain")["steps"]] == [("span", "nightly.workflow"), ("span", "GET /health")]


def test_a_harness_runs_page_links_to_its_trajectory_with_a_step_summary_and_a_comparison(api, project, owner_client):
    harness = Harness.objects.create(
        project=project, name="agentic", repo_url="https://x.org/a/b", install_command="true", run_command="true", compute_type="cpu"
    )
    runs = [Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=50, status="succeeded", score=s) for s in (0.5, 0.9)]
    for run in runs:
        post(api, agent_session(str(run.pk)))
        TraceSession.objects.filter(session_id=str(run.pk)).update(run=run)
    page = owner_client.get(f"/runs/{runs[0].pk}/").content.decode()
    assert f'href="/traces/sessions/{runs[0].pk}/">Traces of this run' in page
    assert "<strong>4</strong> steps · <strong>3</strong> LLM calls · <strong>1</strong> tool call · 360 input / 90 output tokens" in page
    assert "1 error" in page and "Compare with another run of this harness" in page
    assert f'<option value="{runs[1].pk}">run #{runs[1].pk} · score 0.9</option>' in page
    untraced = Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=50, status="succeeded")
    listing = owner_client.get(f"/harnesses/{harness.pk}/").content.decode()
    assert f'<a href="/traces/sessions/{runs[1].pk}/">steps</a>' in listing and f'<a href="/traces/sessions/{untraced.pk}/">' not in listing


def test_a_harness_comparison_lists_its_runs_each_linked_to_its_trajectory(api, project, owner_client):
    harness = Harness.objects.create(
        project=project, name="agentic", repo_url="https://x.org/a/b", install_command="true", run_command="true", compute_type="cpu"
    )

    def scored(label, score, *, traced=True):
        run = Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=50, status="succeeded", score=score, model_label=label)
        if traced:
            post(api, agent_session(str(run.pk)))
            TraceSession.objects.filter(session_id=str(run.pk)).update(run=run)
        return run

    base_traced, base_untraced = scored("base", 0.5), scored("base", 0.6, traced=False)
    tuned_low, tuned_high = scored("tuned", 0.8), scored("tuned", 0.9)
    scored("other", 0.7)  # not in the comparison
    with CaptureQueriesContext(connection) as plain:
        owner_client.get(f"/harnesses/{harness.pk}/")
    with CaptureQueriesContext(connection) as compared:
        page = owner_client.get(f"/harnesses/{harness.pk}/", {"a": "base", "b": "tuned"}).content.decode()
    assert len(compared) == len(plain) + 1  # the compared runs, whether each traced in the same query
    table = page[page.index('id="compared-runs"') : page.index("</table>", page.index('id="compared-runs"'))]
    rows = table.split("<tr>")[2:]
    assert [row.split("#")[1].split("<")[0] for row in rows] == [str(r.pk) for r in (base_untraced, base_traced, tuned_high, tuned_low)]
    assert "not traced" in rows[0] and f'<a href="/traces/sessions/{base_traced.pk}/">steps</a>' in rows[1]
    # B's runs open beside A's best traced run, step by step.
    for row, run in zip(rows[2:], (tuned_high, tuned_low), strict=True):
        assert f'<a href="/traces/sessions/{run.pk}/">steps</a>' in row
        assert f'href="/traces/diff/?s={base_traced.pk}&amp;s={run.pk}">step by step against #{base_traced.pk}</a>' in row
    assert owner_client.get("/traces/diff/", {"s": [base_traced.pk, tuned_high.pk]}).status_code == 200
