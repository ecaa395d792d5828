"""Property-based fuzzing of the parsers that read untrusted bytes.

Each parser either returns a value that can be stored as it is (text that
PostgreSQL accepts: UTF-8 without NUL or lone surrogates) or raises its own
error, which the callers turn into a 400 or a run's message. Anything else
(RecursionError, OverflowError, a KeyError) would be a 500 or a crashed
worker.
"""

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evals.datasets.rows import DatasetError, parse_jsonl
from harnesses.results import parse_results
from traces import otlp

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Any code point, lone surrogates and NUL included: JSON can spell them all as escapes.
any_text = st.text(st.characters(exclude_categories=()), max_size=20)
scalars = st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False) | any_text
json_values = st.recursive(scalars, lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4), max_leaves=30)
any_value = st.deferred(
    lambda: st.one_of(
        st.fixed_dictionaries({"stringValue": st.text(max_size=30) | json_values}),
        st.fixed_dictionaries({"intValue": st.integers() | st.text(max_size=30) | json_values}),
        st.fixed_dictionaries({"doubleValue": st.floats() | st.text(max_size=10) | json_values}),
        st.fixed_dictionaries({"boolValue": json_values}),
        st.fixed_dictionaries({"arrayValue": st.fixed_dictionaries({"values": st.lists(any_value, max_size=3)}) | json_values}),
        st.fixed_dictionaries({"kvlistValue": st.fixed_dictionaries({"values": st.lists(key_value, max_size=3)}) | json_values}),
        json_values,
    )
)
key_value = st.fixed_dictionaries({"key": st.text(max_size=10) | json_values, "value": any_value})
hex_id = lambda n: st.text("0123456789abcdef", min_size=n, max_size=n) | json_values  # noqa: E731
spans = st.fixed_dictionaries(
    {},
    optional={
        "traceId": hex_id(32),
        "spanId": hex_id(16),
        "parentSpanId": hex_id(16),
        "name": st.text(max_size=20) | json_values,
        "kind": st.integers() | st.text(max_size=20) | json_values,
        "startTimeUnixNano": st.integers(min_value=-1, max_value=2**70) | st.text(max_size=25) | st.floats(),
        "endTimeUnixNano": st.integers(min_value=-1, max_value=2**70) | st.text(max_size=25) | st.floats(),
        "attributes": st.lists(key_value, max_size=4) | json_values,
        "events": st.lists(st.fixed_dictionaries({"name": json_values, "attributes": st.lists(key_value, max_size=2)}), max_size=2) | json_values,
        "status": st.fixed_dictionaries({"code": json_values, "message": json_values}) | json_values,
    },
)
otlp_documents = st.fixed_dictionaries(
    {
        "resourceSpans": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "resource": st.fixed_dictionaries({"attributes": st.lists(key_value, max_size=3)}) | json_values,
                    "scopeSpans": st.lists(
                        st.fixed_dictionaries({}, optional={"scope": json_values, "spans": st.lists(spans, max_size=3) | json_values}), max_size=2
                    )
                    | json_values,
                },
            )
            | json_values,
            max_size=3,
        )
        | json_values
    }
)


def storable(value):
    """Text in it encodes as UTF-8 and holds no NUL (what PostgreSQL takes)."""
    text = json.dumps(value, default=str)
    json.loads(text).__repr__().encode("utf-8")
    assert "\\u0000" not in text
    for part in _strings(value):
        part.encode("utf-8")
        assert "\x00" not in part


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def parse_otlp_or_refuse(body: bytes):
    try:
        parsed = otlp.parse(body, "application/json")
    except otlp.IngestError as exc:
        assert 400 <= exc.status < 500
        return None
    for span in parsed.spans:
        storable(span)
    return parsed


@FUZZ
@given(otlp_documents)
def test_otlp_json_documents_parse_or_are_refused(document):
    parse_otlp_or_refuse(json.dumps(document).encode())


def outcome(body: bytes):
    try:
        parsed = otlp.parse(body, "application/json")
    except otlp.IngestError as exc:
        return exc.status, exc.message
    return parsed.spans, parsed.rejected, parsed.reasons


def ascii_only(value):
    """The document with every string made printable ASCII, so its JSON needs no escapes.

    Without the backslash and the quote: JSON escapes them too (a string
    holding a backslash and a `u` came out as the body's `\\u`, which a
    fuzz run in the fast tier drew).
    """
    if isinstance(value, str):
        return "".join(c for c in value.encode("ascii", "replace").decode() if " " <= c < "\x7f" and c not in '\\"')
    if isinstance(value, dict):
        return {ascii_only(k): ascii_only(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ascii_only(v) for v in value]
    return value


@FUZZ
@given(otlp_documents.map(ascii_only))
def test_otlp_json_bodies_without_escapes_parse_as_any_other(document):
    # A body of ASCII without escapes skips the cleaning of each key and
    # value; one escape anywhere in it (here in a field no parser reads, put
    # last so that a refusal names the same line and column) takes the path
    # that cleans them. Both must read the spans the same.
    body = json.dumps(document).encode()
    assert b"\\u" not in body
    assert outcome(body) == outcome(json.dumps({**document, "unread": "\u00e9"}).encode())


@FUZZ
@given(st.lists(key_value, max_size=6).map(ascii_only))
# Found by this test in CI: an intValue of 1e999 (a float infinity to JSON parsers) raised OverflowError.
@example([{"key": "n", "value": {"intValue": float("inf")}}])
def test_attributes_of_a_body_without_escapes_are_read_as_any_others(items):
    assert otlp._json_attributes(items, 0, plain=True) == otlp._json_attributes(items, 0, plain=False)


@FUZZ
@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_otlp_arbitrary_bodies_parse_or_are_refused(body):
    parse_otlp_or_refuse(body)
    try:
        otlp.parse(body, "application/x-protobuf")
    except otlp.IngestError as exc:
        assert exc.status == 400


@FUZZ
@given(json_values.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_results_json_always_gives_a_storable_result_or_a_reason(raw):
    parsed = parse_results(raw)
    assert parsed.error or parsed.score is not None
    if parsed.results is not None:
        storable(parsed.results)
    storable(parsed.error)


@FUZZ
@given(st.lists(json_values.map(json.dumps) | st.text(max_size=40), max_size=5).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")))
def test_dataset_files_give_storable_rows_or_a_reason(data):
    try:
        rows = parse_jsonl(data)
    except DatasetError:
        return
    storable(rows)


def test_deep_nesting_is_refused_not_a_crash():
    for depth in (33, 338):
        value = '{"arrayValue": {"values": [' * depth + '{"stringValue": "x"}' + "]}}" * depth
        span = f'{{"traceId": "{"ab" * 16}", "spanId": "{"cd" * 8}", "startTimeUnixNano": "1", "endTimeUnixNano": "2", "attributes": [{{"key": "k", "value": {value}}}]}}'
        body = f'{{"resourceSpans": [{{"scopeSpans": [{{"spans": [{span}]}}]}}]}}'.encode()
        assert parse_otlp_or_refuse(body) is None
    deep = b"[" * 5000 + b"]" * 5000
    assert "is not valid" in parse_results(deep).error
    try:
        parse_jsonl(b'{"input": ' + deep + b', "expected": "x"}')
    except DatasetError:
        pass
