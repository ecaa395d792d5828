import gc
import gzip
import zlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from rest_framework.test import APIClient

from belvedir.core.models import ApiKey
from traces.models import Span, TraceSession

from .otlp_builders import body, new_id, span

pytestmark = pytest.mark.django_db


def post(client, payload, content_type="application/json", **headers):
    return client.generic("POST", "/api/v1/traces", payload, content_type=content_type, **headers)


def test_it_stores_spans_with_extracted_fields(api, project):
    trace = new_id(32)
    root = span("send_email.workflow", session_id="s1", trace_id=trace, kind="workflow")
    llm = span(
        "openai.chat",
        session_id="s1",
        trace_id=trace,
        parent=root["spanId"],
        user_message="Email Danny",
        model="gpt-4o",
        tokens=(120, 30),
        attributes={"traceloop.association.properties.user_id": "u-9", "custom.thing": "kept"},
    )
    response = post(api, body([root, llm]))
    assert response.status_code == 200
    assert response.json() == {}  # an ExportTraceServiceResponse with nothing rejected
    stored = Span.objects.get(span_id=llm["spanId"])
    assert (stored.session_id, stored.user_id, stored.span_kind, stored.model) == ("s1", "u-9", "llm", "gpt-4o")
    assert (stored.input_tokens, stored.output_tokens) == (120, 30)
    assert stored.prompt == [{"role": "user", "content": "Email Danny"}]
    assert stored.completion == [{"role": "assistant", "content": "ok: Email Danny"}]
    assert stored.parent_span_id == root["spanId"] and stored.attributes["custom.thing"] == "kept"
    # Message text is stored once, as messages, not again among the attributes.
    assert not [key for key in stored.attributes if key.startswith(("gen_ai.prompt.", "gen_ai.completion."))]
    assert stored.attributes["gen_ai.request.model"] == "gpt-4o"
    assert stored.latency_ms == pytest.approx(500)
    assert stored.resource == {"service.name": "agent"}
    session = TraceSession.objects.get(project=project, session_id="s1")
    assert (session.span_count, session.input_tokens, session.output_tokens) == (2, 120, 30)
    assert Span.objects.get(span_id=root["spanId"]).workflow_name == "send_email"


def test_newer_token_names_and_other_session_keys(api):
    one = span("a", kind="llm", attributes={"session.id": "s-otel", "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3})
    two = span("b", kind="llm", attributes={"gen_ai.conversation.id": "s-conv"})
    assert post(api, body([one, two])).status_code == 200
    assert Span.objects.get(span_id=one["spanId"]).input_tokens == 7
    assert set(TraceSession.objects.values_list("session_id", flat=True)) == {"s-otel", "s-conv"}


def test_the_number_of_queries_does_not_grow_with_spans(api):
    # Warm-up: a key's first request also records when it was first used.
    assert post(api, body([span("warm-up")])).status_code == 200
    counts = []
    for n in (10, 1000):
        spans = [span(f"s{i}", session_id=f"sess-{i % 3}") for i in range(n)]
        with CaptureQueriesContext(connection) as queries:
            assert post(api, body(spans)).status_code == 200
        counts.append(len(queries))
    assert Span.objects.count() == 1011
    assert counts[0] == counts[1] <= 25


def test_resent_spans_are_not_duplicated(api):
    spans = [span("x", session_id="s"), span("y", session_id="s")]
    post(api, body(spans))
    post(api, body(spans))
    assert Span.objects.count() == 2


def test_a_partly_resent_batch_keeps_only_its_new_spans(api, project):
    old = [span("x", session_id="s", start_s=1_700_000_000), span("y", session_id="s", start_s=1_700_000_001)]
    assert post(api, body(old)).status_code == 200
    late = span("z", session_id="s", start_s=1_700_000_100)
    response = post(api, body([*old, late]))
    assert response.status_code == 200 and response.json() == {}
    assert sorted(Span.objects.values_list("name", flat=True)) == ["x", "y", "z"]
    # The same request went on to update its session after skipping the old spans.
    assert TraceSession.objects.get(project=project, session_id="s").last_span_at.timestamp() == pytest.approx(1_700_000_100.5)


def test_attribute_values_keep_their_types(api):
    values = [
        {"key": "text", "value": {"stringValue": "naïve 🚀"}},
        {"key": "count", "value": {"intValue": "9007199254740993"}},
        {"key": "ratio", "value": {"doubleValue": 0.25}},
        {"key": "flag", "value": {"boolValue": True}},
        {"key": "list", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "2"}]}}},
        {"key": "map", "value": {"kvlistValue": {"values": [{"key": "inner", "value": {"stringValue": "b"}}]}}},
        {"key": "not_a_string", "value": {"stringValue": 5}},
        {"key": "cut", "value": {"stringValue": "é" * 70_000}},
    ]
    assert post(api, body([{**span("typed", kind=None), "attributes": values}])).status_code == 200
    attributes = Span.objects.get().attributes
    assert {k: v for k, v in attributes.items() if k != "cut"} == {
        "text": "naïve 🚀",
        "count": 9007199254740993,
        "ratio": 0.25,
        "flag": True,
        "list": ["a", 2],
        "map": {"inner": "b"},
        "not_a_string": "5",
    }
    assert attributes["cut"].startswith("é" * 100) and "truncated 4464 characters" in attributes["cut"]


def test_numbers_past_what_their_columns_hold_are_stored_safely(api):
    # Found hostile: a kind of -3 failed the span table's check, and an intValue
    # past 64 bits failed orjson, for the whole batch on every retry: the
    # processor stopped on it. A kind of 70000 was wrapped to 4464 by the binary COPY.
    wide = {"key": "wide", "value": {"intValue": "99999999999999999999999"}}
    spans = [
        {**span("kind too large"), "kind": 70000, "status": {"code": 70000}},
        {**span("kind negative"), "kind": -3, "status": {"code": -1}},
        {**span("wide int"), "attributes": [wide, {"key": "u64", "value": 18446744073709551615}]},
    ]
    assert post(api, body(spans)).status_code == 200
    stored = {s.name: s for s in Span.objects.all()}
    assert [(stored[n].kind, stored[n].status_code) for n in ("kind too large", "kind negative")] == [(0, 0), (0, 0)]
    assert stored["wide int"].attributes == {"wide": "99999999999999999999999", "u64": 18446744073709551615}

    # Protobuf enums are open: any int32 parses.
    message = ExportTraceServiceRequest()
    proto_span = message.resource_spans.add().scope_spans.add().spans.add()
    proto_span.trace_id, proto_span.span_id, proto_span.name = bytes.fromhex("ef" * 16), bytes.fromhex("12" * 8), "proto kind"
    proto_span.start_time_unix_nano, proto_span.end_time_unix_nano = 1_700_000_000_000_000_000, 1_700_000_001_000_000_000
    proto_span.kind, proto_span.status.code = 70000, -7
    assert post(api, message.SerializeToString(), "application/x-protobuf").status_code == 200
    assert (Span.objects.get(name="proto kind").kind, Span.objects.get(name="proto kind").status_code) == (0, 0)


@pytest.mark.parametrize("payload", [body([span("ok")]), b"{not json"])
def test_ingest_leaves_the_garbage_collector_on(api, payload):
    assert gc.isenabled()
    post(api, payload)
    assert gc.isenabled()


def test_bad_ids_are_rejected_one_by_one_and_counted(api):
    good = span("good")
    spans = [good, {**span("bad"), "traceId": "xyz"}, {**span("short"), "spanId": "abc"}, {**span("missing"), "traceId": ""}]
    response = post(api, body(spans))
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "3" and "traceId" in partial["errorMessage"]
    assert list(Span.objects.values_list("name", flat=True)) == ["good"]


def test_protobuf_bodies_and_gzip(api):
    message = ExportTraceServiceRequest()
    resource_spans = message.resource_spans.add()
    proto_span = resource_spans.scope_spans.add().spans.add()
    proto_span.trace_id, proto_span.span_id, proto_span.name = bytes.fromhex("ab" * 16), bytes.fromhex("cd" * 8), "proto span"
    proto_span.start_time_unix_nano, proto_span.end_time_unix_nano = 1_700_000_000_000_000_000, 1_700_000_000_500_000_000
    kv = proto_span.attributes.add()
    kv.key, kv.value.string_value = "session.id", "pb-session"
    response = post(api, gzip.compress(message.SerializeToString()), "application/x-protobuf", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-protobuf"
    parsed = ExportTraceServiceResponse()
    parsed.ParseFromString(response.content)
    assert parsed.partial_success.rejected_spans == 0
    stored = Span.objects.get()
    assert (stored.trace_id, stored.span_id, stored.session_id) == ("ab" * 16, "cd" * 8, "pb-session")


@pytest.mark.parametrize(
    "payload, content_type, headers, status, message",
    [
        (b"{not json", "application/json", {}, 400, "not valid JSON"),
        (b"[1, 2]", "application/json", {}, 400, "ExportTraceServiceRequest"),
        (b'{"resourceSpans": "x"}', "application/json", {}, 400, "must be a list"),
        (b"<xml/>", "text/xml", {}, 415, "Content-Type"),
        (b"\x0a\xff\xff\xff", "application/x-protobuf", {}, 400, "not a valid OTLP protobuf"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "\xff\xfe"}]}]}]}', "application/json", {}, 400, "UTF-8"),
        (b"\x1f\x8b\x08\x00garbage", "application/json", {"HTTP_CONTENT_ENCODING": "gzip"}, 400, "gzip"),
        (b"{}", "application/json", {"HTTP_CONTENT_ENCODING": "br"}, 415, "Content-Encoding"),
    ],
)
def test_malformed_bodies_get_a_specific_error(api, payload, content_type, headers, status, message):
    response = post(api, payload, content_type, **headers)
    assert response.status_code == status
    assert message in response.json()["detail"]
    assert not Span.objects.exists()


def test_truncated_protobuf_is_refused(api):
    message = ExportTraceServiceRequest()
    message.resource_spans.add().scope_spans.add().spans.add().name = "x" * 100
    response = post(api, message.SerializeToString()[:-20], "application/x-protobuf")
    assert response.status_code == 400


def test_over_a_thousand_spans_is_413(api):
    response = post(api, body([span(f"s{i}") for i in range(1001)]))
    assert response.status_code == 413 and "1001 spans" in response.json()["detail"]
    assert not Span.objects.exists()


def test_over_five_megabytes_is_413(api):
    big = span("big", attributes={"blob": "x" * (6 * 1024 * 1024)})
    response = post(api, body([big]))
    assert response.status_code == 413
    assert not Span.objects.exists()


def test_a_gzip_bomb_is_refused_without_inflating_it(api):
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\0" * (1 << 20)
    bomb = b"".join(compressor.compress(chunk) for _ in range(1024)) + compressor.flush()  # inflates to 1 GB
    assert len(bomb) < 2 * 1024 * 1024
    response = post(api, bomb, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413 and "inflates" in response.json()["detail"]


def test_nul_bytes_and_huge_values_are_stored_safely(api):
    weird = span("nul\x00name", session_id="s\x00id", attributes={"big": "y" * 200_000, "nul": "a\x00b"})
    assert post(api, body([weird])).status_code == 200
    stored = Span.objects.get()
    assert stored.name == "nulname" and stored.session_id == "sid"
    assert stored.attributes["nul"] == "ab"
    assert len(stored.attributes["big"]) < 70_000 and "truncated" in stored.attributes["big"]


def test_keys_are_required_and_checked(project, owner):
    assert post(APIClient(), body([span("x")])).status_code == 401
    key, raw = ApiKey.issue(project=project, user=owner, name="ingest", scope="ingest")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert post(client, body([span("during")])).status_code == 200
    key.revoke()
    assert post(client, body([span("after")])).status_code == 401
    assert list(Span.objects.values_list("name", flat=True)) == ["during"]


def test_outcomes(api, project):
    post(api, body([span("x", session_id="chat-1")]))
    ok = api.post("/api/v1/outcomes", {"session_id": "chat-1", "outcome": "success"}, format="json")
    assert ok.status_code == 200 and ok.json()["outcome"] == "success"
    api.post("/api/v1/outcomes", {"session_id": "chat-1", "outcome": "fail"}, format="json")
    assert TraceSession.objects.get().outcome == "fail"  # the latest report wins
    assert api.post("/api/v1/outcomes", {"session_id": "nope", "outcome": "fail"}, format="json").status_code == 404
    assert api.post("/api/v1/outcomes", {"session_id": "chat-1", "outcome": "meh"}, format="json").status_code == 400


def test_another_projects_sessions_are_invisible(api, outsider_api):
    post(api, body([span("x", session_id="private")]))
    assert outsider_api.get("/api/v1/sessions/private").status_code == 404
    assert outsider_api.post("/api/v1/outcomes", {"session_id": "private", "outcome": "fail"}, format="json").status_code == 404
    assert outsider_api.get("/api/v1/sessions").json()["results"] == []
    assert api.get("/api/v1/sessions").json()["results"][0]["session_id"] == "private"


@pytest.fixture
def run_key(project, owner, tmp_path):
    """A run's own ingest key, as the worker issues it."""
    from harnesses.models import Run

    from .harness_fixtures import harness

    key, raw = ApiKey.issue(project=project, user=owner, name="run", scope="ingest", per_run=True)
    run = Run.objects.create(project=project, harness=harness(project, owner, tmp_path), price_cents=50, created_by=owner, api_key=key)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client, str(run.pk)


def test_a_runs_key_writes_spans_only_into_its_own_session(run_key, api):
    client, own = run_key
    post(api, body([span("someone's chat", session_id="chat-7")]))
    response = post(client, body([span("mine", session_id=own), span("unnamed"), span("forged", session_id="chat-7")]))
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert sorted(Span.objects.filter(session_id=own).values_list("name", flat=True)) == ["mine", "unnamed"]
    assert list(Span.objects.filter(session_id="chat-7").values_list("name", flat=True)) == ["someone's chat"]
    assert TraceSession.objects.get(session_id="chat-7").span_count == 1


def test_a_runs_key_whose_run_is_gone_writes_nothing_not_even_spans_naming_no_session(project, owner):
    key, raw = ApiKey.issue(project=project, user=owner, name="run", scope="ingest", per_run=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    response = post(client, body([span("unnamed"), span("named", session_id="chat-1")]))
    assert response.status_code == 200 and response.json()["partialSuccess"]["rejectedSpans"] == "2"
    assert not Span.objects.exists() and not TraceSession.objects.exists()
    assert client.post("/api/v1/outcomes", {"session_id": "", "outcome": "fail"}, format="json").status_code in (400, 403)


def test_a_runs_key_reports_the_outcome_of_its_own_session_only(run_key, api):
    client, own = run_key
    post(api, body([span("someone's chat", session_id="chat-7")]))
    post(client, body([span("mine", session_id=own)]))
    refused = client.post("/api/v1/outcomes", {"session_id": "chat-7", "outcome": "fail"}, format="json")
    assert refused.status_code == 403
    assert TraceSession.objects.get(session_id="chat-7").outcome == ""
    allowed = client.post("/api/v1/outcomes", {"session_id": own, "outcome": "success"}, format="json")
    assert allowed.status_code == 200 and TraceSession.objects.get(session_id=own).outcome == "success"


def test_otlp_json_nested_338_deep_answers_400(api):
    value = '{"arrayValue": {"values": [' * 338 + '{"stringValue": "x"}' + "]}}" * 338
    span_json = f'{{"traceId": "{"ab" * 16}", "spanId": "{"cd" * 8}", "startTimeUnixNano": "1", "endTimeUnixNano": "2", "attributes": [{{"key": "k", "value": {value}}}]}}'
    response = post(api, f'{{"resourceSpans": [{{"scopeSpans": [{{"spans": [{span_json}]}}]}}]}}'.encode())
    assert response.status_code == 400
    assert "nested deeper than" in response.json()["detail"]
    assert not Span.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_same_batch_sent_twice_at_once_is_stored_and_counted_once(api_key, project):
    from .concurrency import run_concurrently

    payload = body([span(f"dup-{i}", session_id="twice", tokens=(10, 5)) for i in range(200)])

    def send(i):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
        return post(client, payload).status_code

    assert run_concurrently(send, 2) == [200, 200]
    assert Span.objects.filter(session_id="twice").count() == 200
    session = TraceSession.objects.get(session_id="twice")
    assert (session.span_count, session.input_tokens, session.output_tokens) == (200, 2000, 1000)


def session_span(*attributes):
    """A span whose attributes are these (key, AnyValue) pairs, in order."""
    encoded = span("step", kind=None)
    encoded["attributes"] = [{"key": key, "value": value} for key, value in attributes]
    return encoded


FOREIGN_CASES = {
    "an int id, its own": ([session_span(("session.id", {"intValue": "7"}))], 0),
    "an empty first key, another session after it": (
        [session_span(("traceloop.association.properties.session_id", {"stringValue": ""}), ("session.id", {"stringValue": "chat-1"}))],
        1,
    ),
    "a NUL in the key": ([session_span(("session.id\x00", {"stringValue": "chat-1"}))], 1),
    "the last of two values": ([session_span(("session.id", {"stringValue": "chat-1"}), ("session.id", {"stringValue": "7"}))], 0),
    "a null value, no session": ([session_span(("gen_ai.conversation.id", None))], 0),
    "a conversation id": ([session_span(("gen_ai.conversation.id", {"stringValue": "chat-2"})), session_span()], 1),
    "another attribute, an array": ([session_span(("session.id", {"stringValue": "chat-1"}), ("deep", {"arrayValue": {"values": [{}]}}))], 1),
}


@pytest.mark.parametrize("case", list(FOREIGN_CASES))
def test_a_runs_key_counts_another_sessions_spans_from_their_session_attributes_as_the_full_parse_does(case):
    from traces import otlp
    from traces.ingest import foreign_in_body, foreign_spans

    spans, foreign = FOREIGN_CASES[case]
    encoded = body(spans)
    assert otlp.span_attributes(encoded, "application/json", frozenset(["session.id"])) is not None  # the light path was taken
    assert foreign_in_body(encoded, "application/json", "7") == foreign_spans(otlp.parse(encoded, "application/json").spans, "7") == foreign
    snake = encoded.replace(b'"resourceSpans"', b'"resource_spans"')
    assert otlp.span_attributes(snake, "application/json", frozenset(["session.id"])) is None
    assert foreign_in_body(snake, "application/json", "7") == foreign


def test_a_runs_key_sending_a_value_nested_too_deep_is_answered_not_failed(run_key):
    client, own = run_key
    deep = {"stringValue": "bottom"}
    for _ in range(40):
        deep = {"arrayValue": {"values": [deep]}}
    response = post(client, body([session_span(("session.id", {"stringValue": "chat-1"}), ("deep", deep))]))
    assert response.status_code == 200 and response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert not Span.objects.exists()  # the worker refused the batch whole
