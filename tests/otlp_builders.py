"""OTLP/JSON request bodies shaped like the belvedir SDK's (OpenLLMetry attributes)."""

import itertools
import json
import time

_ids = itertools.count(1)


def new_id(length: int) -> str:
    return f"{next(_ids):0{length}x}"


def attr(key, value):
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def span(
    name,
    *,
    session_id=None,
    trace_id=None,
    span_id=None,
    parent=None,
    start_s=None,
    duration_s=0.5,
    kind="llm",
    attributes=None,
    user_message=None,
    model=None,
    tokens=None,
):
    start = int((start_s if start_s is not None else time.time()) * 1e9)
    attrs = dict(attributes or {})
    if session_id:
        attrs["traceloop.association.properties.session_id"] = session_id
    if kind:
        attrs["traceloop.span.kind"] = kind
    if kind == "workflow":
        attrs["traceloop.entity.name"] = name.removesuffix(".workflow")
    if user_message is not None:
        attrs["gen_ai.prompt.0.role"] = "user"
        attrs["gen_ai.prompt.0.content"] = user_message
        attrs["gen_ai.completion.0.role"] = "assistant"
        attrs["gen_ai.completion.0.content"] = "ok: " + user_message
    if model:
        attrs["gen_ai.request.model"] = model
    if tokens:
        attrs["gen_ai.usage.prompt_tokens"], attrs["gen_ai.usage.completion_tokens"] = tokens
    encoded = {
        "traceId": trace_id or new_id(32),
        "spanId": span_id or new_id(16),
        "name": name,
        "kind": 3,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + int(duration_s * 1e9)),
        "attributes": [attr(k, v) for k, v in attrs.items()],
        "events": [],
        "status": {"code": 0},
    }
    if parent:
        encoded["parentSpanId"] = parent
    return encoded


def request(spans, service="agent") -> dict:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attr("service.name", service)]},
                "scopeSpans": [{"scope": {"name": "opentelemetry.instrumentation.openai"}, "spans": list(spans)}],
            }
        ]
    }


def body(spans) -> bytes:
    return json.dumps(request(spans)).encode()
