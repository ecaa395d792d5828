"""Every real trace client against a live server, under gunicorn as in production and under the server `make run` starts.

The clients: the belvedir SDK, OpenTelemetry's Python protobuf exporter,
OpenTelemetry's JavaScript JSON and protobuf exporters (which send chunked
bodies; installed by scripts/test.sh from tests/js/package-lock.json), and
traceloop-sdk's `openai` instrumentation driving the official `openai` client
against a fake OpenAI server. Each must land its spans whole: the LLM spans'
messages on the session page and in the API, the task's first user message
the user's prompt, the session's user and metadata.
"""

import html
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from traces.models import Span, Task, TraceSession
from traces.segmentation import segment

from .fakes.openai_server import FakeOpenAI
from .servers import batches_stored, web_server

# Through the asynchronous path, as deployed: each server has the real
# `process_trace_batches` beside it (tests/servers.py), nothing inline.
pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]

TESTS = Path(__file__).resolve().parent
QUESTION = "What is the weather in Lisbon?"


@pytest.fixture(scope="module", params=["production", "make-run"])
def server(request, django_db_setup):
    with web_server(request.param) as url:
        yield url


def _answer(text):
    """A weather question gets a tool call; the tool's result, the final answer; anything else, "ok"."""
    if "weather in Lisbon" in text:
        return {"tool_calls": [{"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}]}
    return "It is sunny in Lisbon, 24 °C." if text.startswith("Sunny") else "ok"


@pytest.fixture(scope="module")
def fake_openai():
    with FakeOpenAI(answer=_answer) as fake:
        yield fake


def run_client(args, cwd, timeout=120) -> str:
    # Without PYTHONPATH too: this project's own `belvedir` package would shadow the SDK's module.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def assert_lands_whole(session_id, prompt, owner_client, api, *, user, metadata, tool=None):
    """The session's messages on its page and in the API; its task's first user message; who and what."""
    batches_stored()
    session = TraceSession.objects.get(session_id=session_id)
    assert segment(session)
    assert (session.user_id, session.metadata) == (user, metadata)
    task = Task.objects.get(session=session)
    assert task.first_user_message == prompt
    page = owner_client.get(f"/traces/sessions/{session_id}/").content.decode()
    assert html.escape(prompt) in page and f"<code>{user}</code>" in page
    if tool:
        assert f"Tool call <strong>{tool}</strong>" in page
    detail = api.get(f"/api/v1/sessions/{session_id}").json()
    assert (detail["user_id"], detail["metadata"]) == (user, metadata)
    prompts = [m for s in detail["spans"] for m in s["prompt"]]
    assert {"role": "user", "content": prompt} in prompts
    return detail


SDK_SCRIPT = """
import sys
import belvedir
from openai import OpenAI

base_url, api_key, openai_url = sys.argv[1:4]
belvedir.initialize(api_key=api_key, base_url=base_url, app_name="sdk-test", disable_batch=True, instrument_http=False)
with belvedir.session("sdk-session-1", user_id="user-7", metadata={"plan": "pro"}):
    with belvedir.task("send_email"):
        OpenAI(base_url=openai_url, api_key="sk-fake").chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Send an email to Danny"}]
        )
belvedir.flush()
print("OUTCOME", belvedir.report_outcome("sdk-session-1", "success"))
print("MISSING", belvedir.report_outcome("never-sent", "success"))
"""


def test_the_belvedir_sdk_lands_spans_under_its_session(server, fake_openai, api_key, project, owner_client, api, tmp_path):
    # Run outside the repo: this project's own `belvedir` package would shadow the SDK's module.
    out = run_client([sys.executable, "-c", textwrap.dedent(SDK_SCRIPT), server, api_key, fake_openai.url], cwd=tmp_path)
    assert "OUTCOME True" in out and "MISSING False" in out
    batches_stored()
    assert TraceSession.objects.get(project=project, session_id="sdk-session-1").outcome == "success"
    spans = {s.name: s for s in Span.objects.filter(session_id="sdk-session-1")}
    assert {"send_email.workflow", "openai.chat"} <= set(spans)
    llm = spans["openai.chat"]
    assert llm.parent_span_id == spans["send_email.workflow"].span_id
    assert (llm.model, llm.user_id) == ("gpt-4o-mini", "user-7")
    assert llm.completion == [{"role": "assistant", "content": "ok", "finish_reason": "stop"}]
    assert_lands_whole("sdk-session-1", "Send an email to Danny", owner_client, api, user="user-7", metadata={"plan": "pro"})


def test_the_opentelemetry_python_protobuf_exporter_lands_too(server, api_key, project, owner_client, api):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    exporter = OTLPSpanExporter(endpoint=f"{server}/api/v1/traces", headers={"Authorization": f"Bearer {api_key}"})
    provider = TracerProvider(resource=Resource.create({"service.name": "otel-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("otel-test")
    session = {"session.id": "otel-session", "user.id": "otel-user"}
    # Messages as span events (GenAI conventions 1.27-1.36), tokens as an int and a double.
    with tracer.start_as_current_span(
        "chat gpt-4o", attributes={**session, "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 4, "gen_ai.usage.output_tokens": 2.0}
    ) as llm:
        llm.add_event("gen_ai.user.message", {"content": "Summarise my inbox"})
        llm.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": json.dumps({"role": "assistant", "content": "Three unread mails."})})
    provider.shutdown()
    batches_stored()
    stored = Span.objects.get(session_id="otel-session")
    assert (stored.name, stored.input_tokens, stored.output_tokens) == ("chat gpt-4o", 4, 2)
    assert stored.resource["service.name"] == "otel-test"
    assert stored.completion == [{"role": "assistant", "content": "Three unread mails.", "finish_reason": "stop"}]
    assert_lands_whole("otel-session", "Summarise my inbox", owner_client, api, user="otel-user", metadata={})


@pytest.mark.parametrize("protocol", ["json", "proto"])
def test_the_javascript_exporters_chunked_bodies_land(server, protocol, api_key, owner_client, api):
    session_id = f"js-{protocol}"
    out = run_client(["node", str(TESTS / "js" / "export.mjs"), server, api_key, protocol, session_id], cwd=TESTS / "js", timeout=60)
    assert "EXPORTED" in out
    batches_stored()
    spans = {s.name: s for s in Span.objects.filter(session_id=session_id)}
    assert set(spans) == {"book_flight.workflow", "openai.chat"}
    llm = spans["openai.chat"]
    assert (llm.model, llm.input_tokens, llm.output_tokens) == ("gpt-4o-mini", 21, 9)
    assert llm.prompt[0] == {"role": "system", "content": "You book flights."}
    assert llm.completion[0]["tool_calls"] == [{"id": "call_1", "name": "search_flights", "arguments": '{"to":"LIS"}'}]
    assert_lands_whole(session_id, "Book me a flight to Lisbon", owner_client, api, user="js-user", metadata={"plan": "pro"}, tool="search_flights")


def test_traceloop_openai_instrumentation_lands_messages_and_tool_calls(server, fake_openai, api_key, owner_client, api):
    out = run_client([sys.executable, str(TESTS / "clients" / "traceloop_agent.py"), server, api_key, fake_openai.url, "traceloop-session"], cwd=TESTS)
    assert "ANSWER It is sunny in Lisbon" in out
    batches_stored()
    names = sorted(Span.objects.filter(session_id="traceloop-session").values_list("name", flat=True))
    assert names == ["get_weather.tool", "openai.chat", "openai.chat", "weather_question.workflow"]
    detail = assert_lands_whole("traceloop-session", QUESTION, owner_client, api, user="traceloop-user", metadata={"tier": "gold"}, tool="get_weather")
    final = [s for s in detail["spans"] if s["name"] == "openai.chat"][-1]
    assert final["prompt"][-1] == {"role": "tool", "tool_call_id": "call_w1", "content": "Sunny, 24 °C in Lisbon"}
    assert final["completion"] == [{"role": "assistant", "content": "It is sunny in Lisbon, 24 °C.", "finish_reason": "stop"}]
    assert (final["input_tokens"], final["output_tokens"]) == (5, 7)
    # Its trajectory: the steps in order, the model's messages and tool call, the tool's arguments and result, the tokens.
    trajectory = api.get("/api/v1/sessions/traceloop-session/steps").json()
    steps = trajectory["steps"]
    assert [(s["kind"], s["tool"] or s["name"]) for s in steps] == [
        ("span", "weather_question.workflow"),
        ("llm", "openai.chat"),
        ("tool", "get_weather"),
        ("llm", "openai.chat"),
    ]
    asked, ran, answered = steps[1:]
    assert asked["prompt"][-1] == {"role": "user", "content": QUESTION} and asked["model"] == "gpt-4o-mini"
    assert [(c["name"], json.loads(c["arguments"])) for c in asked["completion"][0]["tool_calls"]] == [("get_weather", {"city": "Lisbon"})]
    assert "Lisbon" in ran["arguments"] and ran["result"] == "Sunny, 24 °C in Lisbon"
    assert answered["completion"][0]["content"] == "It is sunny in Lisbon, 24 °C."
    tokens = sum((s["input_tokens"] or 0) + (s["output_tokens"] or 0) for s in steps)
    assert trajectory["summary"]["tokens"] == tokens > 0 and (trajectory["summary"]["llm_calls"], trajectory["summary"]["tool_calls"]) == (2, 1)
