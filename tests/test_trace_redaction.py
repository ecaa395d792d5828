"""Spans a run's key sends: the run's secrets never reach the span table, nor the training data built from it."""

import base64
import json
from datetime import timedelta
from urllib.parse import quote

import pytest
import time_machine
from django.db import connection
from django.utils import timezone
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from rest_framework.test import APIClient

from belvedir.core.actions import save_secret
from belvedir.core.models import ApiKey
from belvedir.redaction import MASK, MIN_LENGTH
from evals import contamination
from harnesses.models import HarnessEnvVar, Run
from harnesses.redaction import CANARY_ENV, RUN_KEY_ENV, new_canary
from traces.models import Span, TaskGroup
from traces.otlp import MAX_VALUE_CHARS
from traces.segmentation import process_quiet_sessions
from traces.training import jsonl_lines, training_tasks

from .harness_fixtures import harness
from .otlp_builders import body, new_id, span

pytestmark = pytest.mark.django_db

HARNESS_SECRET = "harness-secret-Qv8/z+Lm2w"
PROJECT_SECRET = "hf_projectSecret0x9d7c"


def encoded(value: str) -> list[str]:
    raw = value.encode()
    return [
        value,
        quote(value, safe=""),
        base64.b64encode(raw).decode(),
        base64.b64encode(b"a" + raw).decode(),
        base64.b64encode(b"ab" + raw).decode(),
    ]


def stored_text() -> str:
    """Every stored span and session row, as text: what a secret must not be found in."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(string_agg(row_to_json(s)::text, '\n'), '') FROM traces_span s")
        spans = cursor.fetchone()[0]
        cursor.execute("SELECT coalesce(string_agg(row_to_json(t)::text, '\n'), '') FROM traces_tracesession t")
        return spans + cursor.fetchone()[0]


def assert_none_stored(secrets, text):
    for secret in secrets:
        for form in encoded(secret):
            # row_to_json escapes as JSON does; the forms here need no escaping but "/".
            assert form not in text and form.replace("/", "\\/") not in text, (secret, form)


@pytest.fixture
def run(project, owner, tmp_path):
    """A launched run as the worker leaves it: its key, canary and secrets in place."""
    h = harness(project, owner, tmp_path)
    HarnessEnvVar.objects.create(harness=h, name="MY_TOKEN", value=HARNESS_SECRET, secret=True)
    save_secret(project, "HF_TOKEN", PROJECT_SECRET)
    key, raw = ApiKey.issue(project=project, user=owner, name="run", scope="ingest", per_run=True)
    run = Run.objects.create(
        project=project,
        harness=h,
        price_cents=50,
        created_by=owner,
        api_key=key,
        secret_env={RUN_KEY_ENV: raw, CANARY_ENV: new_canary(), "ADAPTER_URL": "https://x/adapter?sig=signed-value-123"},
    )
    return run


def client_of(run) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run.secret_env[RUN_KEY_ENV]}")
    return client


def secrets_of(run) -> list[str]:
    return [HARNESS_SECRET, PROJECT_SECRET, *run.secret_env.values()]


def leaky_spans(run, values, start_s=None):
    """One LLM call whose every part holds each value in each encoding: attributes, messages, an event, its name."""
    everything = " | ".join(form for value in values for form in encoded(value))
    root = span("agent.workflow", session_id=str(run.pk), kind="workflow", start_s=start_s, duration_s=5)
    call = span(
        f"openai.chat {values[0]}",
        session_id=str(run.pk),
        trace_id=root["traceId"],
        parent=root["spanId"],
        start_s=(start_s or timezone.now().timestamp()) + 1,
        user_message=f"use this key: {everything}",
        attributes={"http.header.authorization": f"Bearer {everything}", f"key.{values[1]}": "x", "gen_ai.completion.0.content": everything},
    )
    call["events"] = [{"timeUnixNano": call["startTimeUnixNano"], "name": "log", "attributes": [{"key": "line", "value": {"stringValue": everything}}]}]
    call["status"] = {"code": 2, "message": everything}
    return [root, call]


def test_a_runs_key_cannot_store_any_of_its_secrets(run):
    response = client_of(run).generic("POST", "/api/v1/traces", body(leaky_spans(run, secrets_of(run))), content_type="application/json")
    assert response.status_code == 200
    assert Span.objects.count() == 2
    text = stored_text()
    assert_none_stored(secrets_of(run), text)
    call = Span.objects.get(parent_span_id__gt="")
    assert call.name == f"openai.chat {MASK}"
    assert MASK in call.events[0]["attributes"]["line"] and MASK in call.status_message
    run.refresh_from_db()
    assert run.secret_reached_output == ["spans"]


def test_a_protobuf_batch_is_redacted_the_same(run):
    message = ExportTraceServiceRequest()
    proto = message.resource_spans.add().scope_spans.add().spans.add()
    proto.trace_id, proto.span_id, proto.name = bytes.fromhex(new_id(32)), bytes.fromhex(new_id(16)), "tool.call"
    proto.start_time_unix_nano, proto.end_time_unix_nano = 1_700_000_000_000_000_000, 1_700_000_001_000_000_000
    for i, value in enumerate(secrets_of(run)):
        attribute = proto.attributes.add()
        attribute.key, attribute.value.string_value = f"arg.{i}", " ".join(encoded(value))
    response = client_of(run).generic("POST", "/api/v1/traces", message.SerializeToString(), content_type="application/x-protobuf")
    assert response.status_code == 200 and Span.objects.count() == 1
    assert_none_stored(secrets_of(run), stored_text())
    assert Span.objects.get().attributes["arg.0"].count(MASK) == 5


def test_a_secret_spelled_in_escapes_inside_a_messages_attribute_is_masked_where_it_is_decoded(run):
    # gen_ai.input.messages is JSON inside an attribute: only extraction
    # decodes its escapes, so the scan must run over what is stored.
    spelled = "".join(f"\\u{ord(c):04x}" for c in HARNESS_SECRET)
    messages = f'[{{"role": "user", "parts": [{{"type": "text", "content": "key {spelled}"}}]}}]'
    spans = [span("chat", session_id=str(run.pk), attributes={"gen_ai.input.messages": messages})]
    assert client_of(run).generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200
    assert Span.objects.get().prompt == [{"role": "user", "content": f"key {MASK}"}]
    assert_none_stored(secrets_of(run), stored_text())


def test_a_run_that_sends_no_secret_is_not_flagged(run):
    spans = [span("openai.chat", session_id=str(run.pk), user_message="what is 2 + 2?")]
    assert client_of(run).generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200
    stored = Span.objects.get()
    assert stored.prompt == [{"role": "user", "content": "what is 2 + 2?"}]
    run.refresh_from_db()
    assert run.secret_places == {} and run.secret_reached_output == []


def test_the_training_export_never_holds_a_redacted_value(run, api):
    # A run's task, segmented and judged a success, exported: the conversation
    # is there, the secrets its messages held are not, in any encoding.
    with time_machine.travel(timezone.now(), tick=False) as clock:
        spans = leaky_spans(run, secrets_of(run), start_s=timezone.now().timestamp())
        assert client_of(run).generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200
        clock.shift(timedelta(seconds=31))
        process_quiet_sessions()
    assert api.post("/api/v1/outcomes", {"session_id": str(run.pk), "outcome": "success"}, format="json").status_code == 200
    group = TaskGroup.objects.get()
    exported = "".join(jsonl_lines(group, training_tasks(run.project, group), contamination.current()))
    *lines, canary = [json.loads(line) for line in exported.splitlines()]
    assert len(lines) == 1 and canary["metadata"]["belvedir_canary"] == str(group.canary)
    roles = [m["role"] for m in lines[0]["messages"]]
    assert roles == ["user", "assistant"] and MASK in lines[0]["messages"][0]["content"]
    assert_none_stored(secrets_of(run), exported)
    # And through the API's download, as a user gets it.
    download = b"".join(api.get(f"/api/v1/task-groups/{group.pk}/training-data").streaming_content).decode()
    # The same lines; the canary line's differ only in the time of export.
    assert download.splitlines()[:-1] == exported.splitlines()[:-1]
    assert_none_stored(secrets_of(run), download)


def test_a_secret_cut_by_a_length_limit_leaves_no_run_of_eight_of_its_characters(run):
    # Parsing cuts values before redaction sees them: a 64 KB attribute or
    # status message, a 500-character name, a 255-character column (the model).
    canary = run.secret_env[CANARY_ENV]

    def straddling(limit: int, secret: str, kept: int = 15) -> str:
        return "x" * (limit - kept) + secret + " and the rest"

    spans = [
        span(
            straddling(500, canary),
            session_id=str(run.pk),
            kind="tool",
            attributes={"tool.result": straddling(MAX_VALUE_CHARS, canary, 20), "gen_ai.request.model": straddling(255, PROJECT_SECRET, 12)},
        )
    ]
    spans[0]["status"] = {"code": 2, "message": straddling(MAX_VALUE_CHARS, HARNESS_SECRET)}
    assert client_of(run).generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200
    stored = Span.objects.get()
    assert stored.name == "x" * 485 + MASK and stored.model == "x" * 243 + MASK
    assert stored.attributes["tool.result"].startswith("x" * (MAX_VALUE_CHARS - 20) + MASK + "… [truncated ")
    text = stored_text()
    for secret in (canary, PROJECT_SECRET, HARNESS_SECRET):
        assert not any(secret[i : i + MIN_LENGTH] in text for i in range(len(secret) - MIN_LENGTH + 1)), secret
    run.refresh_from_db()
    assert run.secret_reached_output == ["spans"]
