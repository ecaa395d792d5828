"""Real clients against a live test server: the belvedir SDK and OpenTelemetry's protobuf exporter."""

import subprocess
import sys
import textwrap

import pytest

from traces.models import Span, TraceSession

pytestmark = pytest.mark.django_db(transaction=True)

SDK_SCRIPT = """
import sys
import belvedir
from opentelemetry import trace

base_url, api_key = sys.argv[1], sys.argv[2]
belvedir.initialize(api_key=api_key, base_url=base_url, app_name="sdk-test", disable_batch=True, instrument_http=False)
tracer = trace.get_tracer("sdk-test")
with belvedir.session("sdk-session-1", user_id="user-7"):
    with belvedir.task("send_email"):
        with tracer.start_as_current_span("openai.chat") as llm:
            llm.set_attribute("traceloop.span.kind", "llm")
            llm.set_attribute("gen_ai.request.model", "gpt-4o-mini")
            llm.set_attribute("gen_ai.prompt.0.role", "user")
            llm.set_attribute("gen_ai.prompt.0.content", "Send an email to Danny")
            llm.set_attribute("gen_ai.usage.prompt_tokens", 11)
            llm.set_attribute("gen_ai.usage.completion_tokens", 5)
belvedir.flush()
print("OUTCOME", belvedir.report_outcome("sdk-session-1", "success"))
print("MISSING", belvedir.report_outcome("never-sent", "success"))
"""


def test_the_belvedir_sdk_lands_spans_under_its_session(live_server, api_key, project, tmp_path):
    # Run outside the repo: this project's own `belvedir` package would shadow the SDK's module.
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SDK_SCRIPT), live_server.url, api_key],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert "OUTCOME True" in result.stdout, result.stderr[-3000:]
    assert "MISSING False" in result.stdout
    session = TraceSession.objects.get(project=project, session_id="sdk-session-1")
    assert session.outcome == "success"
    spans = {s.name: s for s in Span.objects.filter(session_id="sdk-session-1")}
    assert {"send_email.workflow", "openai.chat"} <= set(spans)
    assert spans["send_email.workflow"].span_kind == "workflow"
    llm = spans["openai.chat"]
    assert llm.parent_span_id == spans["send_email.workflow"].span_id
    assert (llm.model, llm.input_tokens, llm.output_tokens, llm.user_id) == ("gpt-4o-mini", 11, 5, "user-7")
    assert llm.prompt == [{"role": "user", "content": "Send an email to Danny"}]


def test_the_opentelemetry_protobuf_exporter_lands_too(live_server, api_key, project):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/api/v1/traces", headers={"Authorization": f"Bearer {api_key}"})
    provider = TracerProvider(resource=Resource.create({"service.name": "otel-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("otel-test")
    with tracer.start_as_current_span("agent.step", attributes={"session.id": "otel-session", "gen_ai.usage.input_tokens": 4}):
        pass
    provider.shutdown()
    stored = Span.objects.get(session_id="otel-session")
    assert stored.name == "agent.step" and stored.input_tokens == 4
    assert stored.resource["service.name"] == "otel-test"
