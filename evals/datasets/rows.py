"""What a dataset row may hold, and rows read from uploaded files (JSONL, CSV).

A row is `{"input", "input_format", "expected", "metadata"}`. Its input is
text, or a conversation: a JSON array of chat messages, which an eval sends
as they are. A row without an input is refused, naming where it was, so a
file, a form or an API call with one is refused whole.
"""

import csv
import json

MAX_ROWS = 100_000
TEXT, MESSAGES = "text", "messages"
NO_INPUT = "has no input: a row needs the text (or messages) the model is asked"


class DatasetError(ValueError):
    """Rows that cannot be stored as given; the message says which and why."""

    status_code = 400


def text(value) -> str:
    """Stored as text: no NUL, lone surrogates (valid as JSON escapes) replaced; objects as JSON."""
    if value is None:
        return ""
    value = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)
    return value.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def storable(value):
    """A JSON value whose every string (keys too) is stored as text() stores it: PostgreSQL's jsonb takes no NUL."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def is_messages(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value)


def messages_of(value, where: str) -> list[dict]:
    """Chat messages given as a list or as its JSON text; each keeps its role and text content (and tool calls)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise DatasetError(f"{where}: a conversation input must be a JSON array of messages, each with a role and content.") from None
    if not is_messages(value):
        raise DatasetError(f"{where}: a conversation input must be a JSON array of messages, each with a role and content.")
    messages = [{**storable(m), "content": text(m.get("content"))} for m in value]
    if not any(m["role"] == "user" and m["content"].strip() for m in messages):
        raise DatasetError(f"{where} {NO_INPUT}: its conversation has no user message.")
    return messages


def clean_row(raw, where: str, *, input_format: str | None = None) -> dict:
    """A row to store from what a file line, a form or the API gave; DatasetError naming `where` otherwise.

    The input is a conversation when it is a list of messages, or when
    `input_format` (or the row's own) says "messages"; text otherwise.
    """
    if not isinstance(raw, dict):
        raise DatasetError(f'{where} must be an object with an "input" (and an "expected").')
    value = raw.get("input")
    wanted = raw.get("input_format") or input_format
    if wanted not in (None, TEXT, MESSAGES):
        raise DatasetError(f"{where}: input_format is {TEXT!r} or {MESSAGES!r}, not {wanted!r}.")
    if wanted == MESSAGES or (wanted is None and is_messages(value)):
        stored, kind = json.dumps(messages_of(value, where), ensure_ascii=False), MESSAGES
    else:
        stored, kind = text(value), TEXT
    if not stored.strip():
        raise DatasetError(f"{where} {NO_INPUT}.")
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise DatasetError(f"{where}: metadata must be an object.")
    return {"input": stored, "input_format": kind, "expected": text(raw.get("expected")), "metadata": storable(metadata)}


def parse_jsonl(data) -> list[dict]:
    """Rows with `input` and `expected` (and optional `metadata`); an error names the first bad line.

    `data` is bytes or a file, read line by line (an uploaded file is never
    read whole into memory).
    """
    rows = []
    for number, line in _lines(data):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"Line {number} is not valid JSON ({exc.msg}).") from None
        except (ValueError, RecursionError):
            # A number too long to convert, or nesting deeper than Python recurses.
            raise DatasetError(f"Line {number} is not valid JSON here (a number too long or nesting too deep).") from None
        if not isinstance(item, dict) or "input" not in item or "expected" not in item:
            raise DatasetError(f'Line {number} needs an object with "input" and "expected".')
        rows.append(clean_row(item, f"Line {number}"))
        _check_size(rows)
    return _some(rows)


def parse_csv(data) -> list[dict]:
    """Rows of a CSV file whose header names `input` and `expected`; its other columns become each row's metadata."""
    lines = _lines(data)
    reader = csv.reader(line for _, line in lines)
    try:
        header = [name.strip().lstrip("\ufeff").lower() for name in next(reader, [])]
        if "input" not in header or "expected" not in header:
            raise DatasetError('The CSV file\'s first line must name its columns, among them "input" and "expected".')
        rows = []
        for fields in reader:
            if not any(field.strip() for field in fields):
                continue
            if len(fields) != len(header):
                raise DatasetError(f"Line {reader.line_num} has {len(fields)} fields; the header has {len(header)}.")
            item = dict(zip(header, fields, strict=True))
            extra = {k: v for k, v in item.items() if k not in ("input", "expected") and k}
            rows.append(clean_row({"input": item["input"], "expected": item["expected"], "metadata": extra}, f"Line {reader.line_num}", input_format=TEXT))
            _check_size(rows)
    except csv.Error as exc:
        raise DatasetError(f"Line {reader.line_num} is not valid CSV ({exc}).") from None
    return _some(rows)


def parse_upload(data, filename: str = "") -> list[dict]:
    """An uploaded file's rows: CSV when its name ends in .csv, JSONL otherwise."""
    return parse_csv(data) if filename.lower().endswith(".csv") else parse_jsonl(data)


def _lines(data):
    """(number, line) of bytes or a binary file, decoded one line at a time."""
    raw_lines = data.splitlines(keepends=True) if isinstance(data, bytes) else data
    for number, raw in enumerate(raw_lines, start=1):
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError:
            raise DatasetError("The file is not UTF-8 text." if number == 1 else f"Line {number} is not UTF-8 text.") from None


def _check_size(rows):
    if len(rows) > MAX_ROWS:
        raise DatasetError(f"A dataset holds at most {MAX_ROWS:,} rows.")


def _some(rows):
    if not rows:
        raise DatasetError("The file has no rows.")
    return rows
