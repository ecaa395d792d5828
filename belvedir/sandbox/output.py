import math
import threading

from belvedir.redaction import MASK, NO_SECRETS, Redactor

__all__ = ["MASK", "TailBuffer", "clean_output", "clean_value"]

# A JSON value read out of a sandbox (a trajectory, results.json) is kept this deep; below, a placeholder.
MAX_DEPTH = 64
TOO_DEEP = "(nested too deeply; not kept)"


class TailBuffer:
    """The last `limit` bytes of a stream, its secrets masked: memory stays bounded however much is written.

    Masking happens as the stream comes, before the tail is cut, so a secret
    split between two chunks, or cut by the tail's start, is never kept in
    part. The last `redactor.carry` bytes wait for the next chunk (a secret
    may go on in it); `text(final=True)` adds them, masked, at the end.
    Set `redactor` before any output it must mask.
    """

    def __init__(self, limit: int, redactor: Redactor = NO_SECRETS):
        self.limit = limit
        self.total = 0
        self.redactor = redactor
        self._data = bytearray()
        self._held = b""
        self._line_start = True  # whether the held bytes begin a line (a piece of a secret there is masked)
        self._lock = threading.Lock()

    def write(self, chunk: bytes):
        with self._lock:
            self.total += len(chunk)
            # NUL bytes out first (PostgreSQL refuses them): a secret with NULs between its characters is found too.
            ready, self._held = self.redactor.stream(self._held + chunk.replace(b"\x00", b""), line_start=self._line_start)
            if ready:
                self._line_start = ready.endswith(b"\n")
            self._data += ready[-self.limit :]
            if len(self._data) > self.limit:
                del self._data[: len(self._data) - self.limit]

    def text(self, *, final: bool = False) -> str:
        with self._lock:
            data = bytes(self._data)
            if final and self._held:
                data = (data + self.redactor.data(self._held, line_start=self._line_start))[-self.limit :]
        return clean_output(data.decode("utf-8", errors="replace"))


def clean_output(text: str | bytes, limit: int | None = None) -> str:
    """The one sanitising step for text that comes out of a sandbox (outputs, logs, errors, file names) before it is
    stored: bytes decoded as UTF-8 with invalid sequences and lone surrogates replaced with U+FFFD, NUL bytes dropped
    (PostgreSQL's text and jsonb refuse both; dropped, not replaced, so a secret spelt with NULs between its
    characters is still the secret to mask), and the last `limit` characters kept."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text[-limit * 4 :] if limit else text).decode("utf-8", errors="replace")
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii():
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text[-limit:] if limit and len(text) > limit else text


def clean_value(value, depth: int = 0):
    """A JSON value out of a sandbox, made storable: every string and key through `clean_output`, numbers that jsonb
    or a reader would refuse (NaN, infinities, integers past 64 bits) as text, parts past MAX_DEPTH replaced. The
    raw bytes it was parsed from are bounded by whoever read them."""
    if isinstance(value, str):
        return clean_output(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)[:40]
    if depth >= MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, dict):
        return {clean_output(str(k)): clean_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_value(v, depth + 1) for v in value]
    return clean_output(str(value))
