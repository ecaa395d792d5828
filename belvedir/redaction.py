"""Secret values taken out of what a workload wrote, before anything stores it.

One rule for every place a run writes (its log, its results.json, the spans
it sends with its key): each secret value, and the ways a program commonly
re-encodes it, becomes MASK. The encodings: the value itself; URL-encoded
(`quote`, `quote_plus`, either case of hex); base64 and URL-safe base64,
as the characters the value alone decides at each of the three alignments
it can sit at inside a longer base64 text (so the value's base64 is found
inside the base64 of a whole file or header, not only on its own); and
each of those as it appears inside a JSON string (escaped).

A value shorter than MIN_LENGTH is not redacted: masking "true" or "1234"
everywhere would wreck the output and protect nothing.

A text cut by a length limit before it reaches the redactor (a span's
64 KB attribute value, its 500-character name, a 255-character column) can
end in the beginning of a secret whose rest was cut off, which no whole form
matches. So a text's end, and the text before its last "…" (how a cut is
marked), is masked too when it is the beginning of a form, MIN_LENGTH
characters or longer: what is left of a secret is never a run of MIN_LENGTH
of its characters, the same bound as for a whole value.

Matching is one Aho-Corasick automaton over all variants, leftmost-longest
(so a value that contains another is masked whole), on bytes: text is
matched as its UTF-8, where a whole character sequence can only match at a
character boundary. The redactor remembers which values it found, which is
how a run learns its canary reached its output.
"""

import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, quote_plus

import orjson
from ahocorasick_rs import BytesAhoCorasick, MatchKind

MASK = "********"
MASK_BYTES = MASK.encode()
MIN_LENGTH = 8
ELLIPSIS = "…".encode()
_HEX_ESCAPE = re.compile(r"%[0-9A-F]{2}")
_URLSAFE = str.maketrans("+/", "-_")


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


def variants(value: str) -> set[str]:
    """The texts standing for `value` in the encodings above."""
    forms = {value, quote(value, safe=""), quote(value), quote_plus(value, safe=""), quote_plus(value)}
    forms |= {_HEX_ESCAPE.sub(lambda m: m[0].lower(), form) for form in forms}
    raw = value.encode()
    for offset in range(3):
        # Only the characters whose six bits all come from the value: the
        # first ones also hold the bytes before it, the last the bytes after.
        encoded = base64.b64encode(b"\0" * offset + raw).decode().rstrip("=")
        decided = encoded[(8 * offset + 5) // 6 : (8 * offset + 8 * len(raw)) // 6]
        forms |= {decided, decided.translate(_URLSAFE)}
    # As it reads inside a JSON string (a quote or backslash escaped; orjson's
    # escaping, which is how span and results text is serialised here).
    forms |= {orjson.dumps(form).decode()[1:-1] for form in forms}
    return forms


class Redactor:
    """Masks `secrets` in bytes, text and JSON-like values; `found` holds the secrets it has masked."""

    def __init__(self, secrets: Iterable[str] = ()):
        self.secrets = frozenset(s for s in secrets if s and len(s) >= MIN_LENGTH)
        self.found: set[str] = set()
        compiled = _compiled(self.secrets)
        self._forms, self._origins, self._automaton, self._hiding = compiled.forms, compiled.origins, compiled.automaton, compiled.hiding
        self._beginnings, self._starts = compiled.beginnings, compiled.starts
        # A stream holds back this much (the longest form less a byte): a
        # form cut by a chunk boundary is whole once the next chunk comes.
        self.carry = max(map(len, self._forms), default=1) - 1

    def __bool__(self):
        return self._automaton is not None

    def data(self, data: bytes) -> bytes:
        """`data` masked, its end too (it may have been cut inside a secret)."""
        return self._mask_cut_end(self._mask(data, len(data))[0])

    def text(self, text: str) -> str:
        if self._automaton is None:
            return text
        # surrogatepass: JSON can spell a lone surrogate, and it must come back as it went in.
        return self.data(text.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")

    def value(self, value):
        """A JSON-like value (dicts, lists, text) with every string masked, keys too."""
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
        if plain is not None and not self._automaton.find_matches_as_indexes(plain):
            return items
        if not self._touched(items):
            return items
        # Only the items that hold one are walked (a span with a secret is rare even in a batch with one).
        return [self.value(item) if self._touched(item) else item for item in items]

    def _touched(self, value) -> bool:
        """Whether `value` holds the start (MIN_LENGTH characters) of a form: a whole one, or one a limit cut."""
        return bool(self._starts.find_matches_as_indexes(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)))

    def stream(self, data: bytes) -> tuple[bytes, bytes]:
        """Mask a stream's pending bytes: (what may be written now, what to hold until the next chunk or the end)."""
        if self._automaton is None:
            return data, b""
        return self._mask(data, max(len(data) - self.carry, 0))

    def _mask(self, data: bytes, safe: int) -> tuple[bytes, bytes]:
        """Mask the matches that start before `safe`; (the masked data up to there, the rest as it was).

        A match that starts before the held-back part is whole: from there to
        the end is at least the longest form's length.
        """
        if self._automaton is None:
            return data, b""
        out, pos = [], 0
        for index, start, end in self._automaton.find_matches_as_indexes(data):
            if start >= safe:
                break
            out += [data[pos:start], MASK_BYTES]
            self.found.add(self._origins[index])
            pos = end
        cut = max(pos, safe)
        out.append(data[pos:cut])
        return b"".join(out), data[cut:]

    def _mask_cut_end(self, data: bytes) -> bytes:
        """`data` with a form's beginning masked where it ends the text or stands before its last "…"."""
        if self._automaton is None or len(data) < MIN_LENGTH:
            return data
        marked = data.rfind(ELLIPSIS)
        for end in (len(data), marked) if marked >= MIN_LENGTH else (len(data),):
            low = max(end - self.carry, 0)
            # Overlapping: the longest beginning that reaches `end` may start inside a shorter one.
            for _, start, _ in self._starts.find_matches_as_indexes(data[low:end], overlapping=True):
                if secret := self._beginnings.get(data[low + start : end]):
                    self.found.add(secret)
                    data = data[: low + start] + MASK_BYTES + data[end:]
                    break
        return data


@dataclass(frozen=True)
class _Compiled:
    forms: list[bytes]
    origins: list[str]  # the secret of each form
    automaton: BytesAhoCorasick | None  # the forms, leftmost-longest
    hiding: _Hiding  # what could hide them in a body
    beginnings: dict[bytes, str]  # each form's beginnings of MIN_LENGTH bytes or more (not the whole form), and their secret
    starts: BytesAhoCorasick  # the first MIN_LENGTH bytes of every form: where a form, whole or cut, can begin


@lru_cache(maxsize=64)
def _compiled(secrets: frozenset[str]) -> _Compiled:
    """What masking `secrets` needs: a run's batches all need the same (~1 ms to make)."""
    origin = {form.encode(): secret for secret in sorted(secrets, key=len) for form in variants(secret)}
    forms = list(origin)
    automaton = BytesAhoCorasick(forms, matchkind=MatchKind.LeftmostLongest) if forms else None
    beginnings = {form[:length]: secret for form, secret in origin.items() for length in range(MIN_LENGTH, len(form))}
    starts = BytesAhoCorasick(list({form[:MIN_LENGTH] for form in forms}) or [b"\0" * MIN_LENGTH])
    return _Compiled(forms, list(origin.values()), automaton, _Hiding(secrets, forms), beginnings, starts)


NO_SECRETS = Redactor()
