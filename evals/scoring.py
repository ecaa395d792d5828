"""Answer extraction and the dataset scorers."""

import re
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from django.conf import settings

from .patterns import PatternError, compile_pattern

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


def gsm8k_answer(output: str) -> str | None:
    """The number after the last '####' when there is one, else the last number."""
    if "####" in (output or ""):
        after = output.rsplit("####", 1)[1]
        if (number := last_number(after.split("\n")[0] if after.strip() else after)) is not None:
            return number
    return last_number(output)


def strip_fences(completion: str) -> str:
    """The code inside the first markdown fence (any language tag), else the text as it is."""
    match = FENCE.search(completion or "")
    return match.group(1) if match else completion


# -- dataset scorers ---------------------------------------------------------


def exact_match(output: str, expected: str, **_) -> float:
    return float(output.strip() == expected.strip())


def contains(output: str, expected: str, **_) -> float:
    return float(expected.strip().lower() in output.lower())


class Usage(NamedTuple):
    """Tokens a scorer spent on the judge for one sample: they count towards the eval's cost, whatever the verdict."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other):
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)


NO_USAGE = Usage()


class ScoringError(Exception):
    """A sample that could not be scored; the message is its error (and `usage`, what its judge spent meanwhile)."""

    def __init__(self, message: str, *, usage: Usage = NO_USAGE):
        super().__init__(message)
        self.usage = usage


def regex(output: str, expected: str, *, pattern: str = "", **_) -> float:
    # The pattern may refer to the expected answer as {expected}. Compiled for
    # each sample, never cached: a cache of bounded patterns is still a worker's
    # memory times its size, and compiling a bounded one takes microseconds.
    limit = settings.EVAL_REGEX_TIMEOUT_SECONDS
    try:
        # `regex` patterns take a timeout, so a catastrophic one such as ^(a+)+$ stops within it
        # instead of holding the eval engine's event loop for seconds (or forever).
        return float(bool(compile_pattern(pattern or "{expected}", expected.strip()).search(output, timeout=limit)))
    except TimeoutError:
        raise ScoringError(f"The regex scorer's pattern took longer than {limit * 1000:g} ms on this output; the sample was not scored.") from None
    except PatternError as exc:
        raise ScoringError(f"The regex scorer's pattern {exc}; the sample was not scored.") from None


def last_number_match(output: str, expected: str, **_) -> float:
    got = last_number(output)
    return float(got is not None and got == normalize_number(expected.strip()))


DATASET_SCORERS = {
    "exact_match": exact_match,
    "contains": contains,
    "regex": regex,
    "last_number": last_number_match,
}
LLM_JUDGE = "llm_judge"
