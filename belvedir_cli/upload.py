"""A multipart/form-data body streamed from disk, so a multi-GB adapter is never held in memory.

Its length is known up front: the server gets a Content-Length (Django reads
multipart bodies by it) and the progress bar a total.
"""

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

CHUNK = 256 * 1024


class MultipartFile:
    def __init__(self, fields: dict[str, str], file_field: str, path: Path, content_type: str = "application/zip"):
        self.boundary = "bv-" + secrets.token_hex(16)
        self.path = Path(path)
        self.size = os.path.getsize(self.path)
        parts = [self._field(name, value) for name, value in fields.items() if value is not None]
        filename = self.path.name.replace('"', "")
        parts.append(
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{filename}"\r\nContent-Type: {content_type}\r\n\r\n'.encode()
        )
        self.head = b"".join(parts)
        self.tail = f"\r\n--{self.boundary}--\r\n".encode()

    def _field(self, name, value) -> bytes:
        return f'--{self.boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + str(value).encode() + b"\r\n"

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    @property
    def length(self) -> int:
        return len(self.head) + self.size + len(self.tail)

    def chunks(self, progress: Callable[[int], None] | None = None) -> Iterator[bytes]:
        yield self.head
        with open(self.path, "rb") as f:
            while chunk := f.read(CHUNK):
                yield chunk
                if progress:
                    progress(len(chunk))
        yield self.tail
