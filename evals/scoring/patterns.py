"""Users' regular expressions, bounded before they are compiled.

The `regex` engine, not RE2: RE2 cannot be stopped once a match starts, and
its linear time has a large constant. `(?:[ab]{0,999}a){1}[ab]{900}$`, well
inside RE2's own limits, took 27 s of CPU on a 1 MB answer (google-re2
1.1.20251105); `regex` gives up at EVAL_REGEX_TIMEOUT_SECONDS, and keeps the
lookarounds and backreferences users write. What `regex` lacks is a bound on
compiling: it unrolls counted repeats, so `(?:(?:a{200}){200}){50}` (24
bytes) took 540 MB, and nested groups recurse in its parser (RecursionError
from about 300 levels). So the pattern's text is measured first, and compiled
only when it is small enough, never into the module's cache (which keeps 500
patterns per process).
"""

import re

import regex

MAX_LENGTH = 1000  # characters a user types
MAX_DEPTH = 50  # nested groups; ordinary patterns use a handful
MAX_REPEAT = 1000  # one counted repeat, as RE2's limit
# Items once counted repeats are unrolled, the measure of what compiling costs:
# about 260 bytes each (`a{4000000}` took 1 GB, `[^x]{1000}` twenty times 5 MB).
MAX_SIZE = 50_000

# Verbose mode's # comments and V1's nested sets would hide text from the measure below.
_UNMEASURED = re.compile(r"\(\?[a-zA-Z0-9-]*(?:x|V1)")
_GROUP_KINDS = ("?:", "?=", "?!", "?<=", "?<!", "?>", "?|")  # not items of the group
_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")


class PatternError(ValueError):
    """A pattern Belvedir will not compile; the message says why, as a predicate ("is too long …")."""


def compile_pattern(template: str, expected: str | None = None):
    """The compiled pattern, `{expected}` replaced by the expected answer (escaped) when one is given; PatternError if it is refused."""
    if len(template) > MAX_LENGTH:
        raise PatternError(f"is too long: {len(template):,} characters (limit {MAX_LENGTH:,})")
    if _UNMEASURED.search(template):
        raise PatternError("uses verbose mode (?x) or version 1 syntax (?V1), which Belvedir's patterns do not support")
    source = template if expected is None else template.replace("{expected}", re.escape(expected))
    measure(source)
    try:
        return regex.compile(source, cache_pattern=False)
    except regex.error as exc:
        raise PatternError(f"is invalid: {exc}") from None


def measure(source: str) -> int:
    """The pattern's size with counted repeats unrolled; PatternError past a limit.

    A scan of the text, not a parse: it may count more than the engine builds
    (a class's text after a POSIX [:name:] is counted as items), never less,
    since a class here ends no later than it does for the engine.
    """
    stack = [0]  # the size of each open group's items so far
    last = 0  # the size of the item a quantifier would repeat
    i, n = 0, len(source)
    while i < n:
        char = source[i]
        if char == "\\":
            i, last = i + 2, 1
            stack[-1] += 1
        elif char == "[":
            i = _class_end(source, i)
            last = 1
            stack[-1] += 1
        elif char == "(":
            if source.startswith("(?#", i):  # a comment, to the next )
                i = source.find(")", i) + 1 or n
                continue
            kind = next((kind for kind in _GROUP_KINDS if source.startswith(kind, i + 1)), "")
            # A capturing group costs about what an item does (its capture slots), each time it is unrolled.
            stack.append(0 if kind else 1)
            if len(stack) - 1 > MAX_DEPTH:
                raise PatternError(f"nests groups more than {MAX_DEPTH} deep")
            i += 1 + len(kind)
        elif char == ")":
            if len(stack) == 1:
                raise PatternError(f"is invalid: unbalanced parenthesis at position {i}")
            last = stack.pop()
            stack[-1] += last
            i += 1
        elif char == "{" and (count := _COUNT.match(source, i)):
            low, high = count.group(1), count.group(2)
            times = max(int(low or 0), int(high or 0) if high else 0)
            if times > MAX_REPEAT:
                raise PatternError(f"repeats {times:,} times (limit {MAX_REPEAT:,} for a counted repeat)")
            # The repeated item is counted once already.
            stack[-1] += last * (max(times, 1) - 1)
            last *= max(times, 1)
            i = count.end()
        elif char in "*+?":  # unbounded or optional: compiled once, not unrolled; `last` stays what a further count repeats
            i += 1
        else:
            last = 1
            stack[-1] += 1
            i += 1
        if stack[-1] > MAX_SIZE:
            raise PatternError(f"is too large to compile: over {MAX_SIZE:,} items once its counted repeats are unrolled")
    if len(stack) > 1:
        raise PatternError("is invalid: missing ), unterminated subpattern")
    return stack[0]


def _class_end(source: str, start: int) -> int:
    """The index after the ] that closes the class opened at `start` (a ] first in the class is a member)."""
    i = start + 1
    if source.startswith("^", i):
        i += 1
    if source.startswith("]", i):
        i += 1
    while i < len(source):
        if source[i] == "\\":
            i += 2
        elif source[i] == "]":
            return i + 1
        else:
            i += 1
    return len(source)
