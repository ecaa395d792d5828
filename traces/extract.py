"""Fields pulled out of span attributes (OpenLLMetry / GenAI semantic conventions).

Messages, in all their generations, are `messages.py`'s.
"""

from datetime import UTC, datetime

from .messages import split

SESSION_KEYS = ("traceloop.association.properties.session_id", "session.id", "gen_ai.conversation.id")
USER_KEYS = ("traceloop.association.properties.user_id", "user.id", "enduser.id")
MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.response.model", "llm.request.model")
INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.usage.prompt_tokens", "llm.token_count.prompt")
OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.usage.completion_tokens", "llm.token_count.completion")
MAX_INT = 2**31 - 1


def _first(attributes: dict, keys) -> str:
    for key in keys:
        value = attributes.get(key)
        if value not in (None, ""):
            return str(value)[:255]
    return ""


def session_of(attributes: dict) -> str:
    return _first(attributes, SESSION_KEYS)


def _tokens(attributes: dict, keys) -> int | None:
    """A count sent as intValue, doubleValue or a string ("12", "12.0")."""
    for key in keys:
        value = attributes.get(key)
        if type(value) is int:  # nearly always: intValue
            return max(0, min(value, MAX_INT))
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf"):
            return max(0, min(int(value), MAX_INT))
    return None


def to_datetime(unix_nano: int) -> datetime:
    return datetime.fromtimestamp(unix_nano / 1e9, tz=UTC)


def extract(span: dict) -> dict:
    """The columns derived from one span, including its attributes minus the messages.

    `association` (the traceloop association properties other than the
    session and user ids) is not a span column: ingest merges it into the
    span's session as its metadata.
    """
    attributes = span["attributes"]
    prompt, completion, other_attributes, association = split(attributes, span["events"])
    association.pop("session_id", None)
    association.pop("user_id", None)
    span_kind = _first(attributes, ("traceloop.span.kind",))[:40]
    workflow = _first(attributes, ("traceloop.workflow.name",))
    if not workflow and span_kind == "workflow":
        workflow = _first(attributes, ("traceloop.entity.name",)) or span["name"].removesuffix(".workflow")
    return {
        "session_id": session_of(attributes),
        "user_id": _first(attributes, USER_KEYS),
        "span_kind": span_kind,
        "workflow_name": workflow,
        "model": _first(attributes, MODEL_KEYS),
        "prompt": prompt,
        "completion": completion,
        "input_tokens": _tokens(attributes, INPUT_TOKEN_KEYS),
        "output_tokens": _tokens(attributes, OUTPUT_TOKEN_KEYS),
        "latency_ms": (span["end"] - span["start"]) / 1e6,
        "attributes": other_attributes,
        "association": association,
    }
