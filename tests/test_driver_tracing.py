"""The drivers' shared tracing: the relay in front of an upstream tool's model, and OTLP to the live server."""

import importlib.util
import json
import subprocess
import sys
import urllib.request

import pytest

from harnesses import drivers
from traces.models import Span

from .fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]

spec = importlib.util.spec_from_file_location("belvedir_driver", drivers.SOURCE / "_shared" / "belvedir_driver.py")
belvedir_driver = importlib.util.module_from_spec(spec)
spec.loader.exec_module(belvedir_driver)


@pytest.fixture
def tracer(live_server, api_key):
    return belvedir_driver.Tracer(service="test", base_url=live_server.url, api_key=api_key, session_id="run-77")


def chat(url, body, key="sk-relay"):
    request = urllib.request.Request(
        f"{url}/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_the_relay_forwards_model_calls_untouched_and_traces_each(tracer, project):
    with FakeOpenAI(answer=lambda q: f"echo: {q}") as fake, belvedir_driver.TracingRelay(tracer, fake.url) as relay:
        reply = chat(relay.url, {"model": "gpt-test", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]})
        chat(relay.url, {"model": "gpt-test", "messages": [{"role": "user", "content": "second"}]})
        assert fake.requests[0]["auth"] == "Bearer sk-relay"  # the tool's own key goes through
    assert reply["choices"][0]["message"]["content"] == "echo: hello there"
    assert relay.calls == 2
    assert tracer.flush() and tracer.sent == 2
    spans = list(Span.objects.filter(project=project, session_id="run-77").order_by("start_unix_nano"))
    assert [s.span_kind for s in spans] == ["llm", "llm"] and {s.model for s in spans} == {"gpt-test"}
    assert spans[0].prompt == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]
    assert spans[0].completion == [{"role": "assistant", "content": "echo: hello there"}]
    assert (spans[0].input_tokens, spans[0].output_tokens) == (2, 3)


def test_a_failed_call_is_traced_as_an_error_and_passed_back(tracer, project):
    with FakeOpenAI() as fake, belvedir_driver.TracingRelay(tracer, fake.url) as relay:
        fake.always_fail["boom"] = 503
        with pytest.raises(urllib.error.HTTPError) as failure:
            chat(relay.url, {"model": "m", "messages": [{"role": "user", "content": "boom"}]})
    assert failure.value.code == 503
    tracer.flush()
    span = Span.objects.get(project=project, session_id="run-77")
    assert span.status_code == 2 and "HTTP 503" in span.attributes["error.message"]


def test_streamed_replies_are_reassembled():
    openai_stream = (
        b'data: {"choices":[{"delta":{"role":"assistant","content":"Hel"}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":"lo"}}],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\ndata: [DONE]\n\n'
    )
    assert belvedir_driver.parse_reply(openai_stream, "openai") == ([{"role": "assistant", "content": "Hello"}], {"prompt_tokens": 5, "completion_tokens": 2})
    anthropic_stream = (
        b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":4}}\n\n'
    )
    assert belvedir_driver.parse_reply(anthropic_stream, "anthropic") == ([{"role": "assistant", "content": "Hi"}], {"input_tokens": 9, "output_tokens": 4})


def test_a_tracing_outage_is_reported_not_fatal():
    tracer = belvedir_driver.Tracer(base_url="http://127.0.0.1:9", api_key="k", session_id="s", attempts=2)
    tracer.record("x", "task", 1, 2, {})
    assert tracer.flush() is False and tracer.failed == 1


def test_the_tasks_file_parses_checks_and_the_limit(tmp_path, monkeypatch):
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("# a comment\nfirst task :: test -f x\n\nsecond task\nthird :: a :: b\n")
    assert belvedir_driver.read_tasks(str(tasks)) == [("first task", "test -f x"), ("second task", None), ("third", "a :: b")]
    monkeypatch.setenv("BELVEDIR_LIMIT", "2")
    assert len(belvedir_driver.read_tasks(str(tasks))) == 2


def test_the_shared_module_needs_only_the_standard_library():
    code = "import sys; sys.path.insert(0, sys.argv[1]); import belvedir_driver; print(sorted(m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names and m not in ('belvedir_driver', '__main__')))"
    done = subprocess.run([sys.executable, "-S", "-c", code, str(drivers.SOURCE / "_shared")], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
