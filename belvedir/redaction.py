"""Secret values taken out of what a workload wrote, before anything stores it.

One rule for every place a run writes (its log, its results.json, the spans
it sends with its key): each secret value, and the ways a program commonly
re-encodes it, becomes MASK. The encodings: the value itself; URL-encoded
(`quote`, `quote_plus`); base64 and URL-safe base64, as the characters the
value alone decides at each of the three alignments it can sit at inside a
longer base64 text (so the value's base64 is found inside the base64 of a
whole file or header, not only on its own); the hex of its bytes (bare, or
a space or colon between bytes); the value reversed; its characters spelled
out with a separator between them (space, dash, newline: each separator
adds a form twice the value's length, and its grams, to every scan); and
each of those as it appears inside a JSON string (escaped). Matching ignores ASCII case (every form is matched on lower-cased
text), so upper-case hex and an upper-cased secret are found too.

A value shorter than MIN_LENGTH is not redacted: masking "true" or "1234"
everywhere would wreck the output and protect nothing.

A piece of a form is masked too, where it touches a boundary: a run of
MIN_LENGTH or more characters of a form that begins or ends a line (a
newline, or the escaped `\n` of JSON and repr text), or a
field (each string of a JSON-like value is one), or a text, or stands before
its last "…" (how a length limit marks a cut). That is a secret printed
half on one line and half on the next, split across two JSON fields, or cut
by a limit before it reached the redactor (a span's 64 KB attribute value,
its 500-character name, a 255-character column). Inside a line a piece is
left alone: a secret's first eight characters ("sk-proj-") are common
words elsewhere.

Matching is one Aho-Corasick automaton over all forms, leftmost-longest (so
a value that contains another is masked whole), and one over every
MIN_LENGTH-byte gram of every form, overlapping, for the pieces: on bytes,
where a whole character sequence can only match at a character boundary.
The redactor remembers which values it found, which is how a run learns
which of its secrets reached its output.
"""

import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, quote_plus

import orjson
from ahocorasick_rs import BytesAhoCorasick, Implementation, MatchKind

MASK = "********"
MASK_BYTES = MASK.encode()
MIN_LENGTH = 8
ELLIPSIS = "…".encode()
_URLSAFE = str.maketrans("+/", "-_")
# What a program puts between a secret's characters to spell it out ("s k - l i v e", one a line).
_SEPARATORS = (" ", "-", "\n", "\r\n")
_LINE_ENDS = (b"\n", b"\r")
# A line's end as JSON and Python's repr write it inside a string: a secret split across two lines and printed as
# JSON or repr text is split by these two characters, not by a newline.
_ESCAPED_LINE_ENDS = (b"\\n", b"\\r")


# A secret can stand in a request body spelled so that none of its forms
# shows: by JSON escapes (outer, or of JSON inside a string, which
# extraction decodes: \\u0073 for s), NUL bytes between its characters
# (stripped before storing), a lone surrogate (stored as "?"), parts joined
# with newlines, a number re-formatted. `_Hiding` says, for a set of
# secrets, which sequences in a body could do that; a body with none of them
# (NULs taken out first) shows each secret's stored occurrence as a form.
_ASCII_ESCAPES = [f"\\u00{digit}".encode() for digit in "01234567"]  # \u0000-\u007f: every ASCII character
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')
_LETTER = re.compile(r"[A-Za-z]")


class _Hiding:
    def __init__(self, secrets: frozenset[str], forms: list[bytes]):
        # Secrets JSON itself escapes (quotes, backslashes, newlines: an SSH
        # key), or without a letter (numbers, re-formatted or joined when
        # stored): only the stored values tell.
        self.never = any(_JSON_ESCAPED.search(s) or not _LETTER.search(s) for s in secrets)
        sequences = list(_ASCII_ESCAPES)
        if any(not s.isascii() or "?" in s for s in secrets):
            sequences.append(b"\\u")
        if any(b"/" in form for form in forms):
            sequences.append(b"\\/")
        # One automaton for all (a NUL is a byte search): `in` over a 2 MB body took ~1.5 ms a needle, this ~0.05 ms for all.
        self._automaton = BytesAhoCorasick(sequences)

    def plain(self, source: bytes) -> bytes | None:
        """`source` ready to be scanned in the stored values' stead, or None when it could hide a secret."""
        if self.never or self._automaton.find_matches_as_indexes(source):
            return None
        return source.replace(b"\x00", b"") if b"\x00" in source else source


def variants(value: str) -> set[bytes]:
    """The texts standing for `value` in the encodings above, lower-cased (matching is on lower-cased text)."""
    raw = value.encode()
    forms = {value, quote(value, safe=""), quote(value), quote_plus(value, safe=""), quote_plus(value)}
    for offset in range(3):
        # Only the characters whose six bits all come from the value: the
        # first ones also hold the bytes before it, the last the bytes after.
        encoded = base64.b64encode(b"\0" * offset + raw).decode().rstrip("=")
        decided = encoded[(8 * offset + 5) // 6 : (8 * offset + 8 * len(raw)) // 6]
        forms |= {decided, decided.translate(_URLSAFE)}
    pairs = [f"{byte:02x}" for byte in raw]
    forms |= {"".join(pairs), " ".join(pairs), ":".join(pairs), value[::-1]}
    forms |= {separator.join(value) for separator in _SEPARATORS}
    # As it reads inside a JSON string (a quote, backslash or newline
    # escaped; orjson's escaping, which is how span and results text is
    # serialised here).
    forms |= {orjson.dumps(form).decode()[1:-1] for form in forms}
    # bytes.lower(): ASCII only, so a lower-cased text keeps every byte where it was.
    return {form.encode().lower() for form in forms}


class Redactor:
    """Masks `secrets` in bytes, text and JSON-like values; `found` holds the secrets it has masked."""

    def __init__(self, secrets: Iterable[str] = ()):
        self.secrets = frozenset(s for s in secrets if s and len(s) >= MIN_LENGTH)
        self.found: set[str] = set()
        compiled = _compiled(self.secrets)
        self._origins, self._automaton, self._hiding = compiled.origins, compiled.automaton, compiled.hiding
        self._grams, self._gram_origins = compiled.grams, compiled.gram_origins
        # A stream holds back this much (the longest form less a byte): a
        # form cut by a chunk boundary is whole once the next chunk comes,
        # and so is any piece of one that reaches a line's end.
        self.carry = compiled.longest - 1

    def __bool__(self):
        return self._automaton is not None

    def data(self, data: bytes, *, line_start: bool = True) -> bytes:
        """`data` masked, its end a boundary too (it may have been cut inside a secret).

        `line_start`: whether `data` begins a line (or a field); False for
        the held-back end of a stream, which begins wherever the last chunk
        was cut.
        """
        return self._mask(data, len(data), line_start=line_start, at_end=True)[0]

    def text(self, text: str) -> str:
        if self._automaton is None:
            return text
        # surrogatepass: JSON can spell a lone surrogate, and it must come back as it went in.
        return self.data(text.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")

    def value(self, value):
        """A JSON-like value (dicts, lists, text) with every string masked, keys too: each string is a field."""
        if self._automaton is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(v) for v in value)
        return value

    def values(self, items: list, source: bytes | None = None) -> list:
        """`value` for a large list, at the cost of one scan when no secret is in it.

        The scan is over the list serialised once (orjson, which escapes only
        quotes, backslashes and control characters: the escaped forms above),
        not over each string: a batch of spans without secrets, the usual
        case, costs one serialisation and one scan. `source`, the body the
        items were decoded from: when nothing in it can hide a secret
        (`_Hiding`), its scan stands for the serialisation and scan (~2 ms
        less a 1,000-span batch).
        """
        if self._automaton is None:
            return items
        plain = self._hiding.plain(source) if source is not None else None
        if plain is not None and not self._touches(plain):
            return items
        if not self._touched(items):
            return items
        # Only the items that hold one are walked (a span with a secret is rare even in a batch with one).
        return [self.value(item) if self._touched(item) else item for item in items]

    def _touched(self, value) -> bool:
        """Whether `value` holds a piece (MIN_LENGTH characters) of a form: a whole one, or one split or cut."""
        return self._touches(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))

    def _touches(self, data: bytes) -> bool:
        # One gram anywhere: a whole form holds them, and so does any piece of one.
        return bool(self._grams.find_matches_as_indexes(data.lower()))

    def stream(self, data: bytes, *, line_start: bool = True) -> tuple[bytes, bytes]:
        """Mask a stream's pending bytes: (what may be written now, what to hold until the next chunk or the end)."""
        if self._automaton is None:
            return data, b""
        return self._mask(data, max(len(data) - self.carry, 0), line_start=line_start, at_end=False)

    def _mask(self, data: bytes, safe: int, *, line_start: bool, at_end: bool) -> tuple[bytes, bytes]:
        """Mask what starts before `safe`; (the masked data up to there, the rest as it was).

        Two kinds of match, found on the lower-cased bytes: a whole form
        (leftmost-longest), and a piece: a run of MIN_LENGTH or more
        characters each window of which is a MIN_LENGTH-gram of a form (one
        overlapping scan of the grams), masked where it touches a boundary,
        that is begins a line (or the text) or ends one (or the text, or
        stands before its last "…", how a cut is marked). That is a secret
        split across two lines, or two fields (each string is masked on its
        own), or cut by a length limit. In a stream (`at_end` False) the
        data's end is no boundary: a piece that reaches it starts in the held
        part, since the hold is as long as any form.
        """
        if self._automaton is None:
            return data, b""
        lowered = data.lower()
        spans = []  # (start, end, secret)
        for index, start, end in self._automaton.find_matches_as_indexes(lowered):
            if start >= safe:
                break
            spans.append((start, end, self._origins[index]))
        ends = {len(data)} if at_end else set()
        if at_end and (marked := data.rfind(ELLIPSIS)) >= MIN_LENGTH:
            ends.add(marked)
        for start, end, index in _runs(self._grams.find_matches_as_indexes(lowered, overlapping=True)):
            if start >= safe:
                break
            begins = (data[start - 1 : start] == b"\n" or data[max(start - 2, 0) : start] in _ESCAPED_LINE_ENDS) if start else line_start
            ends_line = data[end : end + 1] in _LINE_ENDS or data[end : end + 2] in _ESCAPED_LINE_ENDS
            if begins or end in ends or ends_line or (not at_end and end == len(data)):
                spans.append((start, end, self._gram_origins[index]))
        if not spans:
            return data[:safe], data[safe:]
        out, pos = [], 0
        for start, end, secret in sorted(spans):
            self.found.add(secret)
            if end <= pos:
                continue  # inside a span already masked
            if start >= pos:
                out += [data[pos:start], MASK_BYTES]
            pos = end
        cut = max(pos, safe)
        out.append(data[pos:cut])
        return b"".join(out), data[cut:]


def _runs(grams):
    """(start, end, first gram) of each run of grams starting at consecutive positions, from an overlapping scan.

    The grams all have MIN_LENGTH bytes and differ, so at most one starts at
    a position, and the scan reports them by position.
    """
    run_start = run_end = -1
    first = 0
    for index, start, end in grams:
        if start == run_end - MIN_LENGTH + 1:
            run_end = end
            continue
        if run_end >= 0:
            yield run_start, run_end, first
        run_start, run_end, first = start, end, index
    if run_end >= 0:
        yield run_start, run_end, first


@dataclass(frozen=True)
class _Compiled:
    origins: list[str]  # the secret of each form
    automaton: BytesAhoCorasick | None  # the forms, leftmost-longest
    hiding: _Hiding  # what could hide them in a body
    grams: BytesAhoCorasick  # every MIN_LENGTH bytes of every form: where a piece of one, whole, split or cut, can be
    gram_origins: list[str]  # the secret of each gram
    longest: int  # the longest form's length


@lru_cache(maxsize=64)
def _compiled(secrets: frozenset[str]) -> _Compiled:
    """What masking `secrets` needs: a run's batches all need the same (~40 ms to make)."""
    origin = {form: secret for secret in sorted(secrets, key=len) for form in variants(secret)}
    forms = list(origin)
    automaton = BytesAhoCorasick(forms, matchkind=MatchKind.LeftmostLongest) if forms else None
    grams = {form[i : i + MIN_LENGTH]: secret for form, secret in origin.items() for i in range(len(form) - MIN_LENGTH + 1)}
    # A DFA: thousands of grams leave the automaton no prefilter, and a 2 MB body
    # took ~14 ms through the default (an NFA) against ~6 ms through a DFA,
    # which costs ~0.2 s to build once per secret set and process.
    gram_automaton = BytesAhoCorasick(list(grams) or [b"\0" * MIN_LENGTH], implementation=Implementation.DFA)
    return _Compiled(list(origin.values()), automaton, _Hiding(secrets, forms), gram_automaton, list(grams.values()), max(map(len, forms), default=1))


NO_SECRETS = Redactor()
