"""One check for every JSON value a user writes, and the API's JSON parser that applies it to each body.

A value is stored only if PostgreSQL and the code that reads it back can take
it: finite numbers (Python's json reads NaN, Infinity and 1e999, which jsonb
refuses and comparisons misread), integers within a bigint (a seed of 10**30
is a DataError in its column), text without NUL or lone surrogates (jsonb and
text refuse both), and a bounded depth and size. The walk is iterative, so a
value nested 5,000 deep is refused without a RecursionError; json.loads
itself recurses (RecursionError from about 1,000 levels), and the parser turns
that into the same refusal.
"""

import json
import math

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 32  # a chat message with content parts is 5 deep; a suite entry's options 3
MAX_SIZE = 100_000  # characters of text (numbers count 8) per field: a config or options, never a dataset
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # a bigint: what any integer column or jsonb consumer here takes


class JsonValueError(ValueError):
    """A JSON value that cannot be stored or read back; the message names where."""

    status_code = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def check(value, what: str = "the value", *, max_depth: int = MAX_DEPTH, max_size: int | None = MAX_SIZE):
    """The value itself when it is storable JSON, or JsonValueError naming the first part that is not."""
    size = 0
    stack = [(value, what, 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > max_depth:
            raise JsonValueError(f"{where}: nested deeper than {max_depth} levels.")
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise JsonValueError(f"{where}: the key {key!r} is not text.")
                _check_text(key, f"{where}: the key {key[:40]!r}")
                size += len(key)
                stack.append((child, f"{where}.{key[:40]}", depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, str):
            _check_text(item, where)
            size += len(item)
        elif isinstance(item, bool) or item is None:
            size += 1
        elif isinstance(item, int):
            if not INT_MIN <= item <= INT_MAX:
                raise JsonValueError(f"{where}: {str(item)[:30]} is beyond a 64-bit integer.")
            size += 8
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise JsonValueError(f"{where}: numbers must be finite (not NaN or infinity).")
            size += 8
        else:
            raise JsonValueError(f"{where}: {type(item).__name__} is not a JSON value.")
        if max_size is not None and size > max_size:
            raise JsonValueError(f"{what} is larger than {max_size:,} characters.")
    return value


def _check_text(text: str, where: str):
    if "\x00" in text:
        raise JsonValueError(f"{where} holds a NUL character (\\u0000), which cannot be stored.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonValueError(f"{where} holds a lone surrogate (an unpaired \\ud800-\\udfff), which is not text.") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number: numbers must be finite")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text[:30]} is out of a float's range: numbers must be finite")
    return number


def loads(text, what: str = "the value", **limits):
    """json.loads refusing what check() refuses, and deep nesting, with JsonValueError."""
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise JsonValueError(f"{what}: nested deeper than {limits.get('max_depth', MAX_DEPTH)} levels.") from None
    except ValueError as exc:
        raise JsonValueError(f"{what} is not valid JSON: {exc}.") from None
    return check(value, what, **limits)


class JsonBodyParser(JSONParser):
    """The API's JSON: an object (every endpoint takes one), each of its values checked as above."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode((media_type and _charset(media_type)) or "utf-8")
        except (LookupError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - the body is not text in its charset: {exc}") from None
        try:
            # Each field that stores JSON bounds its own size; the body's is the server's limit on requests.
            data = loads(text, "body", max_size=None)
        except JsonValueError as exc:
            raise ParseError(f"JSON parse error - {exc.message}") from None
        if not isinstance(data, dict):
            raise ParseError(f"The body must be a JSON object ({{...}}), not {_kind(data)}.")
        return data


def _charset(media_type: str) -> str | None:
    for part in media_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset":
            return value.strip('"')
    return None


def _kind(value) -> str:
    return {list: "a list", str: "a string", type(None): "null", bool: "a boolean"}.get(type(value), "a number")
