"""OpenAI request bodies, checked and turned into typed requests before any work is queued.

Each check names the parameter it refuses (OpenAI's `param`). JSON's
NaN and Infinity (which Python's parser accepts) and numbers that overflow
to infinity (1e999) reach the range checks, which want finite values and
name the parameter; an integer parameter refuses any float.
"""

import json
import math
import re
from dataclasses import dataclass

from . import tools
from .errors import APIError, invalid, model_not_found
from .runtime import Sampling

MAX_LOGPROBS = 20
MAX_STOPS = 4
MAX_TOOLS = 64
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: tuple[tuple[str, str], ...]
    sampling: Sampling
    stream: bool
    include_usage: bool
    logprobs: bool
    tool_names: frozenset[str] = frozenset()  # the functions the model was offered; its answer is parsed for calls of them


@dataclass(frozen=True)
class CompletionRequest:
    model: str
    prompt: str
    sampling: Sampling
    stream: bool
    include_usage: bool
    echo: bool


def decode(raw: bytes) -> dict:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise APIError(400, f"The request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise APIError(400, "The request body must be a JSON object.")
    return body


def chat(body: dict, model_ids: tuple[str, ...]) -> ChatRequest:
    model = _model(body, model_ids)
    _only_one(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "'messages' must be a non-empty array.")
    functions = _functions(body)
    logprobs = _boolean(body, "logprobs", False)
    top = _integer(body, "top_logprobs", 0, MAX_LOGPROBS)
    if top is not None and not logprobs:
        raise invalid("top_logprobs", "'top_logprobs' needs 'logprobs' set to true.")
    max_tokens = _integer(body, "max_completion_tokens", 0)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", 0)
    stream = _boolean(body, "stream", False)
    if functions and stream:
        raise invalid("stream", "Streaming with tools is not supported by this server: send 'stream': false, or no tools.")
    turns = [_message(index, message) for index, message in enumerate(messages)]
    if functions:
        # The tools join the system message (or make one), where the model is told of them.
        system = turns[0][1] if turns[0][0] == "system" else ""
        turns = [("system", tools.system_prompt(functions, system)), *(turns[1:] if system or turns[0][0] == "system" else turns)]
    return ChatRequest(
        model=model,
        messages=tuple(turns),
        sampling=_sampling(body, max_tokens, (top or 0) if logprobs else None),
        stream=stream,
        include_usage=_include_usage(body, stream),
        logprobs=logprobs,
        tool_names=frozenset(function["name"] for function in functions),
    )


def completion(body: dict, model_ids: tuple[str, ...]) -> CompletionRequest:
    model = _model(body, model_ids)
    _only_one(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise invalid("prompt", "'prompt' must be a string (or an array of one string): this server completes one prompt per request.")
    stream = _boolean(body, "stream", False)
    return CompletionRequest(
        model=model,
        prompt=prompt,
        sampling=_sampling(body, _integer(body, "max_tokens", 0, default=16), _integer(body, "logprobs", 0, MAX_LOGPROBS)),
        stream=stream,
        include_usage=_include_usage(body, stream),
        echo=_boolean(body, "echo", False),
    )


def _model(body: dict, model_ids: tuple[str, ...]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model", "'model' must be a model's id (GET /v1/models lists them).")
    # Exact, as OpenAI's ids are: one spelling per model keeps results grouped under one name.
    if model not in model_ids:
        raise model_not_found(model)
    return model


def _only_one(body: dict):
    for name in ("n", "best_of"):
        if body.get(name) not in (None, 1):
            raise invalid(name, f"'{name}' must be 1: this server generates one choice per request.")


def _sampling(body: dict, max_tokens: int | None, logprobs: int | None) -> Sampling:
    seed = _integer(body, "seed", None)
    return Sampling(
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 0.0, 2.0, default=1.0),
        top_p=_number(body, "top_p", 0.0, 1.0, default=1.0, exclusive_minimum=True),
        # numpy's generators take seeds >= 0; any integer maps to one, the same one every time.
        seed=None if seed is None else seed % 2**64,
        stop=_stop(body.get("stop")),
        logprobs=logprobs,
    )


def _message(index: int, message) -> tuple[str, str]:
    param = f"messages[{index}]"
    if not isinstance(message, dict):
        raise invalid(param, f"'{param}' must be an object with 'role' and 'content'.")
    role = ROLES.get(message.get("role"))
    if role is None:
        raise invalid(f"{param}.role", f"'{param}.role' must be one of {', '.join(ROLES)}.")
    content = message.get("content")
    if content is None and role == "assistant":
        content = ""
    calls = message.get("tool_calls") if role == "assistant" else None
    if isinstance(content, list):
        if not all(isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str) for part in content):
            raise invalid(f"{param}.content", f"'{param}.content' parts must be text parts: this model reads text only.")
        content = "".join(part["text"] for part in content)
    if not isinstance(content, str):
        raise invalid(f"{param}.content", f"'{param}.content' must be a string or an array of text parts.")
    if "\0" in content:
        # The chat template is applied by C code that reads NUL-terminated strings.
        raise invalid(f"{param}.content", f"'{param}.content' must not contain NUL characters.")
    if calls:
        content = tools.assistant_turn(content, _calls(param, calls))
    elif role == "tool":
        content = tools.tool_result(content)
    return role, content


def _functions(body: dict) -> list[dict]:
    """The function tools offered (none when tool_choice is "none"), each {name, description?, parameters?}."""
    offered, choice = body.get("tools"), body.get("tool_choice")
    if choice not in (None, "auto", "none"):
        raise invalid("tool_choice", "'tool_choice' must be 'auto' or 'none' here: this server cannot force a call.")
    if offered is None or offered == [] or choice == "none":
        return []
    if not isinstance(offered, list) or len(offered) > MAX_TOOLS:
        raise invalid("tools", f"'tools' must be an array of at most {MAX_TOOLS} function tools.")
    functions = []
    for index, tool in enumerate(offered):
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
            raise invalid(
                f"tools[{index}]", f"'tools[{index}]' must be {{'type': 'function', 'function': {{'name': …}}}}, the name 1-64 letters, digits, _ or -."
            )
        if not isinstance(function.get("description", ""), str) or not isinstance(function.get("parameters", {}), dict):
            raise invalid(f"tools[{index}].function", f"'tools[{index}].function' needs a string description and an object of parameters.")
        functions.append({key: function[key] for key in ("name", "description", "parameters") if key in function})
    return functions


def _calls(param: str, calls) -> list[dict]:
    if not isinstance(calls, list):
        raise invalid(f"{param}.tool_calls", f"'{param}.tool_calls' must be an array.")
    functions = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not isinstance(function.get("arguments", ""), str):
            raise invalid(f"{param}.tool_calls[{index}]", f"'{param}.tool_calls[{index}]' must hold a function with a name and arguments as a JSON string.")
        functions.append({"name": function["name"], "arguments": function.get("arguments", "")})
    return functions


def _include_usage(body: dict, stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not stream:
        raise invalid("stream_options", "'stream_options' is only allowed when 'stream' is true.")
    if not isinstance(options, dict):
        raise invalid("stream_options", "'stream_options' must be an object.")
    return _boolean(options, "include_usage", False, param="stream_options.include_usage")


def _stop(value) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops) or len(stops) > MAX_STOPS:
        raise invalid("stop", f"'stop' must be a string or an array of at most {MAX_STOPS} strings.")
    return tuple(stops)


def _boolean(body: dict, name: str, default: bool, *, param: str | None = None) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(param or name, f"Invalid type for '{param or name}': expected a boolean, but got {_shown(value)} instead.")
    return value


def _integer(body: dict, name: str, minimum: int | None, maximum: int | None = None, *, default: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(name, f"Invalid type for '{name}': expected an integer, but got {_shown(value)} instead.")
    if minimum is not None and value < minimum:
        raise invalid(name, f"Invalid '{name}': integer below minimum value. Expected a value >= {minimum}, but got {value} instead.")
    if maximum is not None and value > maximum:
        raise invalid(name, f"Invalid '{name}': integer above maximum value. Expected a value <= {maximum}, but got {value} instead.")
    return value


def _number(body: dict, name: str, minimum: float, maximum: float, *, default: float, exclusive_minimum: bool = False) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(name, f"Invalid type for '{name}': expected a number, but got {_shown(value)} instead.")
    value = float(value)
    low = value <= minimum if exclusive_minimum else value < minimum
    if not math.isfinite(value) or low or value > maximum:
        bound = f"> {minimum}" if exclusive_minimum else f">= {minimum}"
        raise invalid(name, f"Invalid '{name}': expected a finite number {bound} and <= {maximum}, but got {value} instead.")
    return value


def _shown(value) -> str:
    return f"{type(value).__name__} {json.dumps(value)[:40]}"
