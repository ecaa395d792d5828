"""Answers taken out of outputs: the last number, normalised, and the code inside a markdown fence."""

import re
from decimal import Decimal, InvalidOperation

NUMBER = re.compile(r"-?\$?\s?\d[\d,]*(?:\.\d+)?|-?\$?\s?\.\d+")
FENCE = re.compile(r"```[ \t]*[\w+#.-]*[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def normalize_number(text: str) -> str | None:
    """'$1,234.50' → '1234.5'; '18.00' → '18'; None when it is not a number."""
    cleaned = text.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    normalized = value.normalize()
    # Decimal('1E+1').normalize() prints in exponent form: render plainly.
    return format(normalized, "f") if normalized == normalized.to_integral() else str(normalized)


def last_number(text: str) -> str | None:
    """The last number in a text, normalized."""
    for match in reversed(NUMBER.findall(text or "")):
        if (number := normalize_number(match)) is not None:
            return number
    return None


def strip_fences(completion: str) -> str:
    """The code inside the first markdown fence (any language tag), else the text as it is."""
    match = FENCE.search(completion or "")
    return match.group(1) if match else completion
