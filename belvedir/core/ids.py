"""Object ids as requests give them: ASCII digits of a positive bigint, nothing else.

`str.isdigit()` (and `isdecimal()`) take "²" and "٣" for digits, which `int()` then refuses or reads as another
number, and a primary key past 64 bits is a DataError in PostgreSQL: every id from a URL's query, a form or a body
goes through `parse_id` before it reaches a query.
"""

MAX_ID = 2**63 - 1


def parse_id(value) -> int | None:
    """The id `value` names (an int, or text of ASCII digits), or None when it names none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value <= MAX_ID else None
    if isinstance(value, str) and 0 < len(value) <= 19 and value.isascii() and value.isdecimal():
        number = int(value)
        return number if 0 < number <= MAX_ID else None
    return None


def is_id(value) -> bool:
    return parse_id(value) is not None
