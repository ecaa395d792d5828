"""Chat messages out of a span, whichever generation of the GenAI conventions carried them.

Every generation comes out in one shape, so the session page, the API, task
segmentation and training data read one thing:

    {"role": "user", "content": "text", "tool_calls": [{"id", "name", "arguments"}],
     "tool_call_id": "…", "reasoning": "…", "finish_reason": "…"}

(only `role` and `content` always; `arguments` is JSON text). Generations, in
the order they are looked for; the first that has messages wins, per side:

1. Indexed attributes: `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`
   (OpenLLMetry before 0.5x) and `llm.prompts.N.*` / `llm.completions.N.*`
   (its first releases).
2. `gen_ai.input.messages` / `gen_ai.output.messages` / `gen_ai.system_instructions`:
   JSON arrays of messages made of typed parts (current semantic conventions,
   OpenLLMetry 0.5x+), as a JSON string or as an OTLP array.
3. `llm.prompts` / `llm.completions` as whole values (a list of strings or a
   JSON document).
4. Span events: `gen_ai.system.message`, `gen_ai.user.message`,
   `gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`
   (conventions 1.27–1.36), `gen_ai.content.prompt` / `gen_ai.content.completion`
   (1.26) and `gen_ai.client.inference.operation.details` (1.37+).
5. `traceloop.entity.input` / `traceloop.entity.output` on workflow, task,
   agent and tool spans: their role is `input` / `output`, never `user`, so a
   decorated function's arguments are not taken for the user's prompt.

The attributes a span's messages came from are dropped from its stored
attributes: message text is most of an LLM span's bytes, and is stored once.
"""

import orjson

INDEXED_PREFIXES = {"gen_ai.prompt.": "prompt", "gen_ai.completion.": "completion", "llm.prompts.": "prompt", "llm.completions.": "completion"}
ASSOCIATION_PREFIX = "traceloop.association.properties."
INPUT_KEY, OUTPUT_KEY, SYSTEM_KEY = "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"
EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user", "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
MAX_METADATA_KEYS = 50
PLAIN_FIELDS = {"role", "content"}


def split(attributes: dict, events: list) -> tuple[list[dict], list[dict], dict, dict]:
    """(prompt, completion, attributes without the message sources, association properties)."""
    indexed: dict[str, dict[int, dict]] = {"prompt": {}, "completion": {}}
    association: dict[str, str] = {}
    # One copy in C, then one lookup per key: this runs for each of a
    # request's ~15,000 attributes, most of which are neither.
    rest = attributes.copy()
    places = _PLACES
    for key, value in attributes.items():
        if (place := places.get(key)) is None:
            place = _place(key)
        if place is _NEITHER:
            continue
        if place[0] == "association":
            if len(association) < MAX_METADATA_KEYS:
                association[place[1]] = (value if type(value) is str else _text(value))[:255]
        else:
            side, index, name = place
            messages = indexed[side]
            # Not setdefault(index, {}): that makes a dict per key, used or not.
            if (fields := messages.get(index)) is None:
                fields = messages[index] = {}
            fields[name] = value
            del rest[key]
    prompt = [_indexed_message(indexed["prompt"][i]) for i in sorted(indexed["prompt"])]
    completion = [_indexed_message(indexed["completion"][i]) for i in sorted(indexed["completion"])]
    if not prompt or not completion:
        prompt, completion = _from_structured(rest, prompt, completion)
    if (not prompt or not completion) and events:
        prompt, completion = _from_events(events, prompt, completion)
    if not prompt and not completion:
        prompt, completion = _from_entity(rest)
    return prompt, completion, rest, association


# Where each key goes: ("association", name), (side, index, field) or
# _NEITHER. The same keys come in every span of an instrumentation: looking
# one up here costs less than testing its prefixes (a third of `split`'s
# time), let alone working out its index and field. Bounded: keys are the
# sender's to choose.
_PLACES: dict[str, tuple] = {}
MAX_PLACES = 10_000
_NEITHER = ("",)


def _place(key: str) -> tuple:
    place: tuple = _NEITHER
    if key.startswith(ASSOCIATION_PREFIX):
        place = ("association", key[len(ASSOCIATION_PREFIX) :][:100])
    else:
        for prefix, side in INDEXED_PREFIXES.items():
            if key.startswith(prefix):
                index, _, name = key[len(prefix) :].partition(".")
                if index.isdecimal() and name:
                    place = (side, int(index), name)
                    break
    if len(_PLACES) >= MAX_PLACES:
        _PLACES.clear()  # one sender's unique keys must not leave the rest uncached
    _PLACES[key] = place
    return place


# -- 1. indexed attributes ------------------------------------------------------


def _indexed_message(fields: dict) -> dict:
    """{"role", "content", "tool_calls.0.name", …} into the common shape.

    Plain role + content (nearly every span) comes back as it is.
    """
    # The length and two lookups first: they spare the usual message a keys view and a set comparison.
    if (len(fields) == 2 and "role" in fields and "content" in fields) or fields.keys() <= PLAIN_FIELDS:
        content = fields.setdefault("content", "")
        if type(content) is str and content.startswith("[{"):
            fields["content"] = _text(_parts_or_text(content))
        return fields
    message: dict = {}
    calls: dict[int, dict] = {}
    for name, value in fields.items():
        head, _, tail = name.partition(".")
        if head == "tool_calls" and tail:
            index, _, field = tail.partition(".")
            if index.isdecimal() and field:
                calls.setdefault(int(index), {})[field] = value
                continue
        if head == "function_call" and tail:  # OpenAI's pre-tools function calling
            calls.setdefault(0, {})[tail] = value
            continue
        message[name] = value
    message["content"] = _text(_parts_or_text(message.get("content", "")))
    if calls:
        message["tool_calls"] = [_tool_call(calls[i]) for i in sorted(calls)]
    return message


def _parts_or_text(content):
    """Content that OpenLLMetry serialised from a list of content blocks, back to the list."""
    if type(content) is str and content.startswith("[{"):
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            return content
    return content


# -- 2 and 3. structured attributes ---------------------------------------------


def _from_structured(attributes: dict, prompt: list, completion: list) -> tuple[list, list]:
    if not prompt and (INPUT_KEY in attributes or SYSTEM_KEY in attributes):
        system = _json(attributes.get(SYSTEM_KEY))
        prompt = ([{"role": "system", "content": _text(system)}] if system else []) + _part_messages(_json(attributes.get(INPUT_KEY)))
        if prompt:
            attributes.pop(INPUT_KEY, None)
            attributes.pop(SYSTEM_KEY, None)
    if not completion and OUTPUT_KEY in attributes:
        completion = _part_messages(_json(attributes[OUTPUT_KEY]))
        if completion:
            del attributes[OUTPUT_KEY]
    if not prompt and "llm.prompts" in attributes:
        prompt = _plain_messages(_json(attributes["llm.prompts"]), "user")
        if prompt:
            del attributes["llm.prompts"]
    if not completion and "llm.completions" in attributes:
        completion = _plain_messages(_json(attributes["llm.completions"]), "assistant")
        if completion:
            del attributes["llm.completions"]
    return prompt, completion


def _part_messages(messages) -> list[dict]:
    """Messages made of typed parts (text, tool_call, tool_call_response, reasoning, …)."""
    if not isinstance(messages, list):
        return []
    out = []
    for raw in messages:
        if not isinstance(raw, dict):
            continue
        message = {"role": _text(raw.get("role") or "")}
        texts, reasoning, calls = [], [], []
        parts = raw.get("parts")
        if not isinstance(parts, list):  # a plain {"role", "content"} message
            parts = [{"type": "text", "content": raw.get("content")}] if raw.get("content") is not None else []
        for part in parts:
            if not isinstance(part, dict):
                texts.append(_text(part))
                continue
            kind = part.get("type", "text")
            if kind in ("text", "refusal"):
                texts.append(_text(part.get("content", part.get("text", ""))))
            elif kind == "reasoning":
                reasoning.append(_text(part.get("content", "")))
            elif kind == "tool_call":
                calls.append(_tool_call(part))
            elif kind == "tool_call_response":
                message["tool_call_id"] = _text(part.get("id") or "")
                texts.append(_text(part.get("response", part.get("result", ""))))
            else:  # uri, blob, file, image…: named, not inlined
                texts.append(f"[{kind} {_text(part.get('mime_type') or part.get('modality') or '')}]".replace(" ]", "]"))
        message["content"] = "\n".join(t for t in texts if t)
        if calls:
            message["tool_calls"] = calls
        if reasoning:
            message["reasoning"] = "\n".join(reasoning)
        if raw.get("finish_reason"):
            message["finish_reason"] = _text(raw["finish_reason"])
        out.append(message)
    return out


def _plain_messages(value, role: str) -> list[dict]:
    """`llm.prompts` as a list of strings, or of OpenAI-style messages."""
    if isinstance(value, str):
        return [{"role": role, "content": value}] if value else []
    if not isinstance(value, list):
        return []
    return [_openai_message(v, role) if isinstance(v, dict) else {"role": role, "content": _text(v)} for v in value]


# -- 4. span events ---------------------------------------------------------------


def _from_events(events: list, prompt: list, completion: list) -> tuple[list, list]:
    found_prompt, found_completion = [], []
    for event in events:
        name, attributes = event.get("name"), event.get("attributes") or {}
        if name in EVENT_ROLES:
            found_prompt.append(_openai_message(attributes, EVENT_ROLES[name]))
        elif name == "gen_ai.choice":
            # The choice's message may sit under `message`, with its tool calls beside it.
            message = _json(attributes.get("message"))
            fields = {"tool_calls": attributes.get("tool_calls"), **message} if isinstance(message, dict) else attributes
            choice = _openai_message(fields, "assistant")
            if attributes.get("finish_reason"):
                choice["finish_reason"] = _text(attributes["finish_reason"])
            found_completion.append(choice)
        elif name == "gen_ai.content.prompt":
            found_prompt += _plain_messages(_json(attributes.get("gen_ai.prompt")), "user")
        elif name == "gen_ai.content.completion":
            found_completion += _plain_messages(_json(attributes.get("gen_ai.completion")), "assistant")
        elif name == DETAILS_EVENT:
            details_prompt, details_completion = _from_structured(dict(attributes), [], [])
            found_prompt += details_prompt
            found_completion += details_completion
    return prompt or found_prompt, completion or found_completion


def _openai_message(fields: dict, role: str) -> dict:
    """An OpenAI-style message ({role, content, tool_calls: [{id, function: {name, arguments}}]})."""
    content = _json(fields.get("content", ""))
    if isinstance(content, dict) and "parts" in content:  # a message of typed parts in the event body
        return _part_messages([{"role": role, **content}])[0]
    message = {"role": _text(fields.get("role") or role), "content": _text(_parts_or_text(content))}
    calls = _json(fields.get("tool_calls"))
    if isinstance(calls, list) and calls:
        message["tool_calls"] = [_tool_call(c) for c in calls if isinstance(c, dict)]
    if call_id := fields.get("tool_call_id") or (fields.get("id") if message["role"] == "tool" else None):
        message["tool_call_id"] = _text(call_id)
    return message


# -- 5. traceloop entity input and output -------------------------------------------


def _from_entity(attributes: dict) -> tuple[list, list]:
    prompt, completion = [], []
    if type(value := attributes.get("traceloop.entity.input")) is str and value:
        prompt = [{"role": "input", "content": _unquoted(value)}]
        del attributes["traceloop.entity.input"]
    if type(value := attributes.get("traceloop.entity.output")) is str and value:
        completion = [{"role": "output", "content": _unquoted(value)}]
        del attributes["traceloop.entity.output"]
    return prompt, completion


def _unquoted(value: str) -> str:
    """A function's return value is JSON: a returned string reads better as itself."""
    if value.startswith('"'):
        try:
            decoded = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        return decoded if type(decoded) is str else value
    return value


# -- shared -----------------------------------------------------------------------


def _tool_call(raw: dict) -> dict:
    """A tool call from any generation: {id, name, arguments} or OpenAI's {id, function: {name, arguments}}."""
    function = _json(raw.get("function"))
    if isinstance(function, dict):
        raw = {**function, "id": raw.get("id")}
    arguments = raw.get("arguments", raw.get("args", ""))
    return {"id": _text(raw.get("id") or ""), "name": _text(raw.get("name") or ""), "arguments": arguments if type(arguments) is str else _dumps(arguments)}


def _json(value):
    """A JSON document sent as a string, or the value itself (an OTLP array or kvlist)."""
    if type(value) is str and value[:1] in ("[", "{"):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _text(value) -> str:
    """Message content as text: strings as they are, lists of parts joined, anything else as JSON."""
    if value is None:
        return ""
    if type(value) is str:
        return value
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        return "\n".join(
            _text(p.get("text", p.get("content", ""))) if p.get("type", "text") in ("text", "input_text", "output_text") else f"[{p.get('type')}]"
            for p in value
        )
    return _dumps(value)


def _dumps(value) -> str:
    return orjson.dumps(value, default=str).decode()
