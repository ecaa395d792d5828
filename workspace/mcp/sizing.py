"""Answers sized for a model: at most about 25,000 tokens, and always saying how to get the rest.

A string longer than FOLD_AT characters is folded: its start is kept with its full length and how to read it
whole. A list the API pages comes one page at a time with a cursor. An answer still over MAX_CHARS (a page of
huge rows) keeps its first items that fit and says how many it left, and how to ask for fewer at a time.
"""

import base64
import json
from urllib.parse import parse_qsl, urlencode, urlsplit

# ~4 characters a token.
MAX_CHARS = 100_000
FOLD_AT = 4_000


def fold(value, how: str):
    """`value` with every string past FOLD_AT characters cut there and marked with its length."""
    if isinstance(value, str) and len(value) > FOLD_AT:
        return value[:FOLD_AT] + f"… [folded: {len(value):,} characters in all; {how}]"
    if isinstance(value, dict):
        return {k: fold(v, how) for k, v in value.items()}
    if isinstance(value, list):
        return [fold(v, how) for v in value]
    return value


def cursor_of(next_url: str | None) -> str | None:
    """The API's `next` link as an opaque cursor: its query string."""
    if not next_url:
        return None
    return base64.urlsafe_b64encode(urlsplit(next_url).query.encode()).decode()


def cursor_for(query: dict) -> str:
    return base64.urlsafe_b64encode(urlencode(query, doseq=True).encode()).decode()


def query_of(cursor: str) -> dict:
    """The query a cursor stands for; ValueError when it is not one this server gave."""
    try:
        return dict(parse_qsl(base64.urlsafe_b64decode(cursor.encode()).decode(), keep_blank_values=True))
    except (ValueError, UnicodeDecodeError):
        raise ValueError("cursor is not one this server gave: pass next_cursor from the previous answer as it came") from None


def size(data) -> int:
    return len(json.dumps(data, default=str))


def fit(data, *, items_key: str | None, how: str):
    """The answer folded and, when a page is still too large, cut to the items that fit (with a note)."""
    data = fold(data, how)
    if size(data) <= MAX_CHARS or not items_key or not isinstance(data, dict) or not isinstance(data.get(items_key), list):
        if size(data) > MAX_CHARS:
            return {
                "truncated": True,
                "note": f"The answer was {size(data):,} characters; ask for less ({how}).",
                "start": json.dumps(data, default=str)[: MAX_CHARS // 2],
            }
        return data
    items, kept = data[items_key], []
    room = MAX_CHARS - size({**data, items_key: []}) - 200
    for item in items:
        room -= size(item) + 2
        if room < 0:
            break
        kept.append(item)
    return {
        **data,
        items_key: kept,
        "cut": f"{len(kept)} of this page's {len(items)} items fit in one answer: ask again with limit={max(1, len(kept))} to page through the rest.",
    }
