import threading

from belvedir.redaction import MASK, NO_SECRETS, Redactor

__all__ = ["MASK", "TailBuffer", "clean_output"]


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


def clean_output(text: str) -> str:
    """Make output safe to store: no NUL bytes (PostgreSQL refuses them)."""
    return text.replace("\x00", "")
