"""The code checks: an output compared with the expected answer by rule, no model asked."""

import json

from django.conf import settings

from .base import AsText, Context, Item, Option, Score, Scorer, ScorerConfigError, ScoringError
from .extraction import last_number, normalize_number
from .patterns import PatternError, compile_pattern

EXPECTED = AsText("", "The expected answer; the item's reference when left empty.")


def exact_match(output: str, expected: str) -> float:
    return float(output.strip() == expected.strip())


def contains(output: str, expected: str) -> float:
    return float(expected.strip().lower() in output.lower())


def last_number_match(output: str, expected: str) -> float:
    got = last_number(output)
    return float(got is not None and got == normalize_number(expected.strip()))


def regex(output: str, expected: str, *, pattern: str = "") -> float:
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


def expected_of(item: Item, options) -> str:
    """The option's expected answer (as text) when it is set, else the item's reference."""
    given = options.get("expected", "")
    return str(given) if given not in ("", None) else item.reference


class Compared(Scorer):
    """A check of the output against the expected answer: the option's, or else the item's reference."""

    options = {"expected": EXPECTED}
    needs_reference = True
    compare = staticmethod(exact_match)

    async def score(self, item: Item, options, ctx: Context) -> Score:
        expected = expected_of(item, options)
        return Score(self.compare(item.output, expected))


class ExactMatch(Compared):
    name = "exact_match"
    description = "1 when the output, trimmed, is the expected answer."


class Contains(Compared):
    name = "contains"
    description = "1 when the output contains the expected answer (any case)."
    compare = staticmethod(contains)


class LastNumber(Compared):
    name = "last_number"
    description = "1 when the output's last number equals the expected one ($ and thousands separators aside)."
    compare = staticmethod(last_number_match)

    async def score(self, item, options, ctx):
        score = await super().score(item, options, ctx)
        return Score(score.value, last_number(item.output) or "")


class Regex(Scorer):
    name = "regex"
    description = "1 when the pattern matches the output; {expected} in it stands for the expected answer, escaped."
    options = {"pattern": Option("", "A regular expression (bounded in size; a match has a time limit)."), "expected": EXPECTED}

    def check(self, options, *, references=True):
        checked = super().check(options, references=references)
        if not checked["pattern"]:
            raise ScorerConfigError('The regex scorer needs a pattern: {"name": "regex", "options": {"pattern": "..."}}.')
        try:
            compile_pattern(checked["pattern"], expected="x")
        except PatternError as exc:
            raise ScorerConfigError(f"The regex scorer's pattern {exc}.") from None
        return checked

    async def score(self, item, options, ctx):
        return Score(regex(item.output, expected_of(item, options), pattern=options["pattern"]))


class JsonValid(Scorer):
    name = "json_valid"
    description = "1 when the output is JSON."

    async def score(self, item, options, ctx):
        try:
            json.loads(item.output)
        except ValueError as exc:
            return Score(0.0, detail={"why": f"not JSON: {exc}"})
        return Score(1.0)
