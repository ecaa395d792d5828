"""OTLP/HTTP trace requests, JSON or protobuf, turned into plain span dicts.

JSON is what the belvedir SDK and the OpenTelemetry JS exporter send (ids as
hex, 64-bit integers as strings); protobuf is what standard OpenTelemetry
exporters send. Both come out as the same `RawSpan` dicts, so extraction and
storage do not care which wire format carried them.
"""

import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

MAX_BODY_BYTES = 5 * 1024 * 1024
MAX_SPANS = 1000
# One attribute value longer than this is cut (and says so): a span is
# context for a person reading it, not a blob store.
MAX_VALUE_CHARS = 64 * 1024
# Array and kvlist values nest; a body nesting deeper is refused (400), so
# it cannot exhaust the parser's recursion (338 levels crashed it).
MAX_VALUE_DEPTH = 32
TOO_DEEP = f"An attribute value is nested deeper than {MAX_VALUE_DEPTH} levels."
MAX_UNIX_NANO = MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
TRACE_ID = re.compile(r"[0-9a-f]{32}\Z")
SPAN_ID = re.compile(r"[0-9a-f]{16}\Z")
SPAN_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


class IngestError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Rejections:
    """Spans refused one by one, counted, with the first few reasons (OTLP's partialSuccess)."""

    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    def reject(self, reason: str):
        self.rejected += 1
        if len(self.reasons) < 5:
            self.reasons.append(reason)


@dataclass
class Parsed(Rejections):
    spans: list[dict] = field(default_factory=list)


def decode_body(raw: bytes, content_encoding: str) -> bytes:
    """Inflate gzip bodies without ever holding more than the limit."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in {"", "identity"}:
        if len(raw) > MAX_BODY_BYTES:
            raise IngestError(413, f"Request body is over {MAX_BODY_BYTES // (1024 * 1024)} MB.")
        return raw
    if encoding != "gzip":
        raise IngestError(415, f"Unsupported Content-Encoding {encoding!r}: send identity or gzip.")
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        body = inflater.decompress(raw, MAX_BODY_BYTES + 1)
    except zlib.error as exc:
        raise IngestError(400, f"Body is not valid gzip: {exc}.") from None
    if len(body) > MAX_BODY_BYTES:
        raise IngestError(413, f"Request body inflates to over {MAX_BODY_BYTES // (1024 * 1024)} MB.")
    if not inflater.eof:
        raise IngestError(400, "Body is truncated gzip.")
    return body


def parse(body: bytes, content_type: str) -> Parsed:
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "application/json":
        return _parse_json(body)
    if media in {"application/x-protobuf", "application/protobuf"}:
        return _parse_protobuf(body)
    raise IngestError(415, "Content-Type must be application/json or application/x-protobuf (OTLP/HTTP).")


@dataclass
class Checked(Rejections):
    """What the request learns about a body before storing it: enough to answer honestly."""

    accepted: int = 0


def check(body: bytes, content_type: str) -> Checked:
    """The structure, the span count and each span's ids and times, without building attributes.

    The request answers from this (400 and 413 for a bad body, partialSuccess
    for bad spans) and stores the body; `parse` later applies the same span
    checks and more (attribute values), so a span passing here can still be
    rejected by the worker, which records it (traces.batches).
    """
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "application/json":
        return _check_json(body)
    if media in {"application/x-protobuf", "application/protobuf"}:
        return _check_protobuf(body)
    raise IngestError(415, "Content-Type must be application/json or application/x-protobuf (OTLP/HTTP).")


# The fast path of `check` for JSON: msgspec decodes a body of well-formed
# spans into these shapes in C, skipping everything else (attributes,
# events: most of the body) without building it. Any body it does not take
# whole (snake_case keys, a bad span, a null) goes the full path, so that
# every answer but "all N spans accepted" comes from one place.


class _CheckedSpan(msgspec.Struct):
    # Ids are checked after decoding, all at once (`_all_valid_count`): a
    # msgspec pattern runs Python's `re` once per id, 3,000 calls per
    # request, which were half of what this check cost.
    traceId: str
    spanId: str
    startTimeUnixNano: int | str
    endTimeUnixNano: int | str
    name: str = ""
    parentSpanId: str = ""
    # The full path reads snake_case where camelCase is absent: a span with
    # either goes there (a bad parent_span_id beside no parentSpanId is a
    # rejection this path would not see).
    parent_span_id: Any = msgspec.UNSET
    trace_id: Any = msgspec.UNSET
    span_id: Any = msgspec.UNSET
    start_time_unix_nano: Any = msgspec.UNSET
    end_time_unix_nano: Any = msgspec.UNSET


class _CheckedScopeSpans(msgspec.Struct):
    spans: list[_CheckedSpan] = []


class _CheckedResourceSpans(msgspec.Struct):
    scopeSpans: list[_CheckedScopeSpans] = []
    scope_spans: Any = msgspec.UNSET


class _CheckedRequest(msgspec.Struct):
    resourceSpans: list[_CheckedResourceSpans] = []
    resource_spans: Any = msgspec.UNSET


_checked_decoder = msgspec.json.Decoder(_CheckedRequest)
_HEX_DIGITS = re.compile(r"[0-9a-fA-F]*")
_UNICODE_ESCAPE = re.compile(rb"\\u")
_ZERO_IDS = {"0" * 32, "0" * 16}
_NO_SNAKE_CASE = (msgspec.UNSET,) * 5


def _camel_case_request(decoder, body: bytes):
    """The body decoded by a fast-path decoder, or None where only the full parser can say (snake_case keys, a refused shape)."""
    try:
        request = decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        # RecursionError: a body nested past msgspec's limit; the full parser refuses it with a 400.
        return None
    if request.resource_spans is not msgspec.UNSET or any(rs.scope_spans is not msgspec.UNSET for rs in request.resourceSpans):
        return None
    return request


def _all_valid_count(body: bytes) -> int | None:
    """How many spans a body has when every one of them passes the checks, else None (take the full path)."""
    if not body.isascii():
        try:
            body.decode("utf-8")  # msgspec does not check the strings it skips
        except UnicodeDecodeError:
            return None
    if (request := _camel_case_request(_checked_decoder, body)) is None:
        return None
    spans = [span for rs in request.resourceSpans for ss in rs.scopeSpans for span in ss.spans]
    _check_count(len(spans))
    try:
        for span in spans:
            start, end = int(span.startTimeUnixNano), int(span.endTimeUnixNano)
            # `_problem`'s rules, but for the ids' digits (below).
            if len(span.traceId) != 32 or len(span.spanId) != 16 or len(span.parentSpanId) not in (0, 16):
                return None
            if span.traceId in _ZERO_IDS or span.spanId in _ZERO_IDS or start <= 0 or end < start or end > MAX_UNIX_NANO:
                return None
            if (span.parent_span_id, span.trace_id, span.span_id, span.start_time_unix_nano, span.end_time_unix_nano) != _NO_SNAKE_CASE:
                return None
    except ValueError:
        return None
    # Every id's length is right, so they are all hex if their concatenation is.
    if not _HEX_DIGITS.fullmatch("".join([part for span in spans for part in (span.traceId, span.spanId, span.parentSpanId)])):
        return None
    return len(spans)


# What a run key's request reads of each span (traces.ingest.foreign_in_body):
# attribute keys, and only the values of the keys it asks for, decoded as the
# full parser decodes them. The rest of the body stays undecoded bytes.
# gc=False: ~15,000 of these per request, holding no cycles; tracked by the
# collector, decoding them took 19 ms a 1,000-span body, untracked 6.


class _AttributeRaw(msgspec.Struct, gc=False):
    key: str
    value: msgspec.Raw = msgspec.Raw(b"null")


class _AttributesSpan(msgspec.Struct, gc=False):
    attributes: list[_AttributeRaw] = []


class _AttributesScopeSpans(msgspec.Struct, gc=False):
    spans: list[_AttributesSpan] = []


class _AttributesResourceSpans(msgspec.Struct, gc=False):
    scopeSpans: list[_AttributesScopeSpans] = []
    scope_spans: Any = msgspec.UNSET


class _AttributesRequest(msgspec.Struct, gc=False):
    resourceSpans: list[_AttributesResourceSpans] = []
    resource_spans: Any = msgspec.UNSET


_attributes_decoder = msgspec.json.Decoder(_AttributesRequest)


def span_attributes(body: bytes, content_type: str, keys: frozenset[str]) -> list[dict] | None:
    """Each span's attributes among `keys`, as `parse` makes them, without building the others.

    None where the body needs the full parser to say (protobuf, snake_case
    keys, an attribute that is not a {key, value} object): take `parse`.
    """
    if (content_type or "").split(";")[0].strip().lower() != "application/json":
        return None
    if (request := _camel_case_request(_attributes_decoder, body)) is None:
        return None
    found = []
    for rs in request.resourceSpans:
        for ss in rs.scopeSpans:
            for span in ss.spans:
                attributes = {}
                for item in span.attributes:
                    # `_json_attributes` cleans a key before using it: a NUL in it is all that can make it one of `keys`.
                    key = item.key.replace("\x00", "") if "\x00" in item.key else item.key
                    if key in keys:
                        attributes[key] = _json_value(orjson.loads(bytes(item.value)) or {}, 0)
                found.append(attributes)
    return found


def _check_json(body: bytes) -> Checked:
    if (count := _all_valid_count(body)) is not None:
        return Checked(accepted=count)
    # Anything else answers from the full parser, which the worker will run
    # too: its refusals (too deep, malformed) word for word, and the spans it
    # would reject, counted now rather than found after the answer.
    parsed = _parse_json(body)
    return Checked(rejected=parsed.rejected, reasons=parsed.reasons, accepted=len(parsed.spans))


def _check_protobuf(body: bytes) -> Checked:
    checked = Checked()
    for _, _, span in _protobuf_spans(body):
        ids = {
            "name": span.name,
            "trace_id": span.trace_id.hex(),
            "span_id": span.span_id.hex(),
            "parent_span_id": span.parent_span_id.hex(),
            "start": span.start_time_unix_nano,
            "end": span.end_time_unix_nano,
        }
        if problem := _problem(ids):
            checked.reject(problem)
        else:
            checked.accepted += 1
    return checked


def success_response(rejected: int, reasons: list[str], as_protobuf: bool):
    """An OTLP ExportTraceServiceResponse; partialSuccess only when something was rejected."""
    message = "; ".join(reasons)
    if as_protobuf:
        response = ExportTraceServiceResponse()
        if rejected:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = message
        return response.SerializeToString(), "application/x-protobuf"
    payload = {"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}} if rejected else {}
    return json.dumps(payload).encode(), "application/json"


# -- JSON ------------------------------------------------------------------------


def _json_document(body: bytes) -> list:
    """The resourceSpans of a JSON body, its structure and span count checked."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if isinstance(exc.__cause__, UnicodeDecodeError) or "utf-8" in str(exc).lower():
            raise IngestError(400, f"Body is not valid UTF-8: {exc}.") from None
        raise IngestError(400, f"Body is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.") from None
    if not isinstance(document, dict):
        raise IngestError(400, "Body must be an OTLP ExportTraceServiceRequest object with resourceSpans.")
    resource_spans = _get(document, "resourceSpans", "resource_spans", default=[])
    if not isinstance(resource_spans, list):
        raise IngestError(400, "resourceSpans must be a list.")
    for rs in resource_spans:
        if not isinstance(rs, dict):
            raise IngestError(400, "Each resourceSpans entry must be an object.")
        for ss in _list(_get(rs, "scopeSpans", "scope_spans", default=[])):
            if not isinstance(ss, dict):
                raise IngestError(400, "Each scopeSpans entry must be an object.")
    _check_count(sum(len(_list(_get(ss, "spans", default=[]))) for rs in resource_spans for ss in _list(_get(rs, "scopeSpans", "scope_spans", default=[]))))
    return resource_spans


def _parse_json(body: bytes) -> Parsed:
    parsed = Parsed()
    # A body of ASCII without escapes (\uXXXX) decodes to strings that need no
    # cleaning (no NUL, no lone surrogates): one look at the bytes here spares
    # a look at each of the ~15,000 keys and values of a 1,000-span request.
    # (A backslash first: one byte is a memchr, ~0.1 ms per 2 MB body; the
    # two of `\u` cost 3.3 ms as a bytes search, 1.7 as a regex, and only a
    # body with escapes in it pays for that.)
    plain = body.isascii() and b"\x00" not in body and (b"\\" not in body or not _UNICODE_ESCAPE.search(body))
    for rs in _json_document(body):
        resource = _json_attributes(_get(_get(rs, "resource", default={}) or {}, "attributes", default=[]))
        for ss in _list(_get(rs, "scopeSpans", "scope_spans", default=[])):
            scope = str(_get(_get(ss, "scope", default={}), "name", default=""))[:255]
            for span in _list(_get(ss, "spans", default=[])):
                _add(parsed, _json_span(span, plain), resource, scope)
    return parsed


def _json_span(span, plain: bool = False) -> dict | str:
    if not isinstance(span, dict):
        return "span is not an object"
    status = _get(span, "status", default={}) or {}
    try:
        return {
            "trace_id": str(_either(span, "traceId", "trace_id", "")).lower(),
            "span_id": str(_either(span, "spanId", "span_id", "")).lower(),
            "parent_span_id": str(_either(span, "parentSpanId", "parent_span_id", "") or "").lower(),
            "name": str(span.get("name", "")),
            "kind": _enum(span.get("kind", 0), SPAN_KINDS),
            "start": int(_either(span, "startTimeUnixNano", "start_time_unix_nano", 0)),
            "end": int(_either(span, "endTimeUnixNano", "end_time_unix_nano", 0)),
            "status_code": _enum(status.get("code", 0), STATUS_CODES),
            "status_message": str(status.get("message", "")),
            "attributes": _json_attributes(span.get("attributes", []), 0, plain),
            "events": [
                {
                    "name": str(e.get("name", "")),
                    "time_unix_nano": str(_get(e, "timeUnixNano", "time_unix_nano", default="")),
                    "attributes": _json_attributes(e.get("attributes", []), 0, plain),
                }
                for e in _list(span.get("events", []))
                if isinstance(e, dict)
            ],
        }
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        return f"span has a malformed field ({exc})"


def _json_attributes(items, depth: int = 0, plain: bool = False) -> dict:
    """`plain`: every string in the body is known clean (`_parse_json`)."""
    attributes = {}
    if type(items) is not list:
        return attributes
    # This loop runs ~15,000 times per 1,000-span request: the usual shapes
    # (a clean key, a short string or a lone intValue) skip the general path.
    for item in items:
        if type(item) is dict and "key" in item:
            key, value = item["key"], item.get("value") or {}
            if type(key) is not str or len(key) > 255 or not (plain or _plain(key)):
                key = _clean(str(key))[:255]
            if type(value) is dict:
                if type(inner := value.get("stringValue")) is str and len(inner) <= MAX_VALUE_CHARS and (plain or _plain(inner)):
                    attributes[key] = inner
                    continue
                if len(value) == 1 and "intValue" in value and depth < MAX_VALUE_DEPTH:
                    attributes[key] = _json_int(value["intValue"])
                    continue
            attributes[key] = _json_value(value, depth)
    return attributes


def _plain(text: str) -> bool:
    """ASCII without NUL: nothing for _clean to do."""
    return text.isascii() and "\x00" not in text


def _json_value(value, depth: int = 0):
    if not isinstance(value, dict):
        return _clean_value(value) if isinstance(value, str | int | float | bool) or value is None else _clean_value(str(value))
    if depth >= MAX_VALUE_DEPTH:
        raise IngestError(400, TOO_DEEP)
    # An AnyValue holds one key; camelCase per OTLP/JSON, snake_case tolerated.
    for key, inner in value.items():
        if handler := _JSON_VALUE_HANDLERS.get(key):
            return handler(inner, depth + 1)
    return None


def _json_int(raw, depth=0):
    try:
        number = int(raw)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an intValue of Infinity
        return _clean_value(str(raw))
    # OTLP's intValue is 64-bit, and so is what jsonb columns are written
    # with (orjson): a wider one stays the text it came as.
    return number if MIN_INT64 <= number <= MAX_INT64 else _clean_value(str(raw))


def _json_double(raw, depth=0):
    try:
        number = float(raw)
    except (TypeError, ValueError):
        return _clean_value(str(raw))
    return number if number == number and abs(number) != float("inf") else str(number)


def _json_array(raw, depth):
    return [_json_value(v, depth) for v in _list(_get(raw, "values", default=[]))]


def _json_kvlist(raw, depth):
    return _json_attributes(_get(raw, "values", default=[]), depth)


_JSON_VALUE_HANDLERS = {}
for _names, _handler in [
    (("stringValue", "string_value"), lambda raw, depth: _clean_value(str(raw))),
    (("boolValue", "bool_value"), lambda raw, depth: bool(raw)),
    (("intValue", "int_value"), _json_int),
    (("doubleValue", "double_value"), _json_double),
    (("arrayValue", "array_value"), _json_array),
    (("kvlistValue", "kvlist_value"), _json_kvlist),
    (("bytesValue", "bytes_value"), lambda raw, depth: _clean_value(str(raw))),
]:
    for _name in _names:
        _JSON_VALUE_HANDLERS[_name] = _handler


# -- protobuf --------------------------------------------------------------------


def _protobuf_spans(body: bytes):
    """(resource spans, scope spans, span) of a protobuf body, its span count checked."""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise IngestError(400, f"Body is not a valid OTLP protobuf ExportTraceServiceRequest: {exc}.") from None
    _check_count(sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans))
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                yield rs, ss, span


def _parse_protobuf(body: bytes) -> Parsed:
    parsed = Parsed()
    resources = {}
    for rs, ss, span in _protobuf_spans(body):
        if id(rs) not in resources:
            resources[id(rs)] = (rs, _pb_attributes(rs.resource.attributes))
        _add(
            parsed,
            {
                "trace_id": span.trace_id.hex(),
                "span_id": span.span_id.hex(),
                "parent_span_id": span.parent_span_id.hex(),
                "name": span.name,
                "kind": _enum(span.kind, SPAN_KINDS),  # proto3 enums are open: any int32 parses
                "start": span.start_time_unix_nano,
                "end": span.end_time_unix_nano,
                "status_code": _enum(span.status.code, STATUS_CODES),
                "status_message": span.status.message,
                "attributes": _pb_attributes(span.attributes),
                "events": [{"name": e.name, "time_unix_nano": str(e.time_unix_nano), "attributes": _pb_attributes(e.attributes)} for e in span.events],
            },
            resources[id(rs)][1],
            ss.scope.name[:255],
        )
    return parsed


def _pb_attributes(items, depth: int = 0) -> dict:
    return {_clean(kv.key)[:255]: _pb_value(kv.value, depth) for kv in items}


def _pb_value(value, depth: int = 0):
    which = value.WhichOneof("value")
    if depth >= MAX_VALUE_DEPTH and which in {"array_value", "kvlist_value"}:
        raise IngestError(400, TOO_DEEP)
    if which == "string_value":
        return _clean_value(value.string_value)
    if which == "bool_value":
        return value.bool_value
    if which == "int_value":
        return value.int_value
    if which == "double_value":
        number = value.double_value
        return number if number == number and abs(number) != float("inf") else str(number)
    if which == "array_value":
        return [_pb_value(v, depth + 1) for v in value.array_value.values]
    if which == "kvlist_value":
        return _pb_attributes(value.kvlist_value.values, depth + 1)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return None


# -- shared ----------------------------------------------------------------------


def _problem(span: dict | str) -> str | None:
    """Why a span is rejected, or None: the checks `check` and `parse` share."""
    if isinstance(span, str):
        return span
    if not TRACE_ID.match(span["trace_id"]) or span["trace_id"] == "0" * 32:
        return f"span {span['name'][:40]!r} has a missing or invalid traceId"
    if not SPAN_ID.match(span["span_id"]) or span["span_id"] == "0" * 16:
        return f"span {span['name'][:40]!r} has a missing or invalid spanId"
    if span["parent_span_id"] and not SPAN_ID.match(span["parent_span_id"]):
        return f"span {span['name'][:40]!r} has an invalid parentSpanId"
    if span["start"] <= 0 or span["end"] < span["start"] or span["end"] > MAX_UNIX_NANO:
        return f"span {span['name'][:40]!r} has invalid start/end times"
    return None


def _add(parsed: Parsed, span: dict | str, resource: dict, scope: str):
    if problem := _problem(span):
        return parsed.reject(problem)
    span["name"] = _clean(span["name"])[:500]
    span["status_message"] = _clean(span["status_message"])[:MAX_VALUE_CHARS]
    span["resource"] = resource
    span["scope"] = _clean(scope)
    parsed.spans.append(span)


def _check_count(count: int):
    if count > MAX_SPANS:
        raise IngestError(413, f"{count} spans in one request; the limit is {MAX_SPANS}. Send smaller batches.")


def _clean(text: str) -> str:
    # PostgreSQL text and jsonb refuse NUL; lone surrogates cannot be encoded.
    # The checks come first because this runs for every key and value.
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", errors="replace").decode("utf-8")
    return text


def _clean_value(value):
    if isinstance(value, str):
        value = _clean(value)
        if len(value) > MAX_VALUE_CHARS:
            return value[:MAX_VALUE_CHARS] + f"… [truncated {len(value) - MAX_VALUE_CHARS} characters]"
    return value


def _enum(value, names: dict) -> int:
    """An enum sent by name or number (numbered 0 to len(names) - 1); 0, unspecified, for one it does not have.

    The column is a small integer: a number past it would be refused by
    PostgreSQL (failing the whole batch) or wrapped by the binary COPY.
    """
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):  # "²" is a digit to isdigit(), not to int()
        return names.get(value, 0)
    number = int(value)
    return number if 0 <= number < len(names) else 0


def _get(mapping, *keys, default=None):
    for key in keys:
        if isinstance(mapping, dict) and key in mapping:
            return mapping[key]
    return default


def _either(span: dict, camel: str, snake: str, default):
    """`_get` of a key OTLP/JSON spells two ways, for a dict: a few times per span, so no loop."""
    if camel in span:
        return span[camel]
    return span.get(snake, default)


def _list(value) -> list:
    return value if isinstance(value, list) else []
