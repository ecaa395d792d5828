"""Fields pulled out of span attributes (OpenLLMetry / GenAI semantic conventions)."""

from datetime import UTC, datetime

SESSION_KEYS = ("traceloop.association.properties.session_id", "session.id", "gen_ai.conversation.id")
USER_KEYS = ("traceloop.association.properties.user_id", "user.id", "enduser.id")
MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.response.model", "llm.request.model")
INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.usage.prompt_tokens")
OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.usage.completion_tokens")
MESSAGE_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.")
MAX_INT = 2**31 - 1


def _first(attributes: dict, keys) -> str:
    for key in keys:
        value = attributes.get(key)
        if value not in (None, ""):
            return str(value)[:255]
    return ""


def _tokens(attributes: dict, keys) -> int | None:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return max(0, min(int(value), MAX_INT))
        if isinstance(value, str) and value.isdigit():
            return min(int(value), MAX_INT)
    return None


def split_messages(attributes: dict) -> tuple[list[dict], list[dict], dict]:
    """gen_ai.prompt.N.role / .content (and any other field) into ordered lists.

    Returns (prompt, completion, the other attributes): message text is most
    of an LLM span's bytes, so it is stored once, as messages, rather than
    twice (the `gen_ai.*.N.*` keys are rebuilt exactly from the lists).
    """
    found: dict[str, dict[int, dict]] = {"prompt": {}, "completion": {}}
    rest = {}
    for key, value in attributes.items():
        if key.startswith(MESSAGE_PREFIXES):
            side, _, field = key.removeprefix("gen_ai.").partition(".")
            index, _, name = field.partition(".")
            if index.isdecimal() and name:
                found[side].setdefault(int(index), {})[name] = value
                continue
        rest[key] = value
    return [found["prompt"][i] for i in sorted(found["prompt"])], [found["completion"][i] for i in sorted(found["completion"])], rest


def to_datetime(unix_nano: int) -> datetime:
    return datetime.fromtimestamp(unix_nano / 1e9, tz=UTC)


def extract(span: dict) -> dict:
    """The columns derived from one span, including its attributes minus the messages."""
    attributes = span["attributes"]
    prompt, completion, other_attributes = split_messages(attributes)
    span_kind = _first(attributes, ("traceloop.span.kind",))[:40]
    workflow = _first(attributes, ("traceloop.workflow.name",))
    if not workflow and span_kind == "workflow":
        workflow = _first(attributes, ("traceloop.entity.name",)) or span["name"].removesuffix(".workflow")
    return {
        "session_id": _first(attributes, SESSION_KEYS),
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
    }
