import threading

MASK = "********"


class TailBuffer:
    """The last `limit` bytes of a stream: memory stays bounded however much is written."""

    def __init__(self, limit: int):
        self.limit = limit
        self.total = 0
        self._data = bytearray()
        self._lock = threading.Lock()

    def write(self, chunk: bytes):
        with self._lock:
            self.total += len(chunk)
            self._data += chunk[-self.limit :]
            if len(self._data) > self.limit:
                del self._data[: len(self._data) - self.limit]

    def text(self, secrets: tuple[str, ...] = ()) -> str:
        with self._lock:
            data = bytes(self._data)
        return clean_output(data.decode("utf-8", errors="replace"), secrets)


def clean_output(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Make output safe to store: no NUL bytes (PostgreSQL refuses them), no secret values."""
    text = text.replace("\x00", "")
    # Longest first, so a secret that contains another is masked whole.
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
