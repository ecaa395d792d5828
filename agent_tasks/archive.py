"""An uploaded task archive (.tar.gz, .tgz, .tar, .tar.bz2, .tar.xz or .zip) read safely into {relative path: bytes}.

Nothing is extracted to disk: members are read into memory, and everything is checked before a byte is kept. Refused:
absolute paths and `..`, links and devices (a link is how an archive reaches outside its root), more than MAX_FILES
members (folders count: a million empty ones cost as much to walk), and more than BELVEDIR_TASK_ARCHIVE_MAX_MB of
the inflated tar itself, headers included: a GNU long name or a pax header is data tarfile reads whole before any
member is seen, so the cap is on the decompressed stream (`_Bounded`), not on members' sizes alone.
"""

import bz2
import gzip
import io
import lzma
import re
import stat
import tarfile
import zipfile
from typing import BinaryIO

from django.conf import settings

# Harbor tasks are a few files each; ten thousand is a large set, and bounds the work per upload.
MAX_FILES = 10_000
CHUNK = 64 * 1024
IGNORED = {".DS_Store"}
WINDOWS_DRIVE = re.compile(r"[A-Za-z]:[\\/]")


class ArchiveError(ValueError):
    """An archive refused: the message names the member and the reason."""

    status_code = 400


def clean_path(name: str) -> str:
    """A member's path relative to the archive's root, or ArchiveError."""
    if name.startswith(("/", "\\")) or WINDOWS_DRIVE.match(name):
        raise ArchiveError(f"{name}: an absolute path; a task archive holds paths relative to its root")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"{name}: a '..' path would leave the archive's root")
    if not parts or any("\x00" in p for p in parts):
        raise ArchiveError(f"{name!r}: not a file path")
    return "/".join(parts)


class _Budget:
    def __init__(self):
        self.max_bytes = settings.TASK_ARCHIVE_MAX_BYTES
        self.total = 0
        self.files: dict[str, bytes] = {}

    def add(self, name: str, stream: BinaryIO) -> None:
        path = clean_path(name)
        if path.rpartition("/")[2] in IGNORED or path.startswith("__MACOSX/"):
            return
        if path in self.files:
            raise ArchiveError(f"{path}: in the archive twice")
        if len(self.files) >= MAX_FILES:
            raise ArchiveError(f"more than {MAX_FILES:,} files; split the task set")
        chunks = []
        while chunk := stream.read(CHUNK):
            self.total += len(chunk)
            if self.total > self.max_bytes:
                raise ArchiveError(f"{path}: the archive inflates past {self.max_bytes // (1024 * 1024)} MB (BELVEDIR_TASK_ARCHIVE_MAX_MB)")
            chunks.append(chunk)
        self.files[path] = b"".join(chunks)


class _Bounded(io.RawIOBase):
    """A decompressed stream that refuses to give more than `limit` bytes in all: what tarfile reads, headers included."""

    def __init__(self, stream: BinaryIO, limit: int, cap: int):
        self.stream, self.limit, self.cap, self.total = stream, limit, cap, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(min(len(buffer), CHUNK))
        self.total += len(data)
        if self.total > self.limit:
            raise ArchiveError(f"the archive inflates past {self.cap // (1024 * 1024)} MB (BELVEDIR_TASK_ARCHIVE_MAX_MB)")
        buffer[: len(data)] = data
        return len(data)


def read_archive(upload: BinaryIO) -> dict[str, bytes]:
    """The archive's files by path: a zip when it starts as one, otherwise a tar (gzip, bzip2, xz or none)."""
    head = upload.read(6)
    upload.seek(0)
    try:
        return _read_zip(upload) if head.startswith(b"PK") else _read_tar(_decompressed(upload, head))
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, lzma.LZMAError) as exc:
        raise ArchiveError(f"not a readable .tar.gz or .zip archive: {exc}") from None


def _decompressed(upload: BinaryIO, head: bytes) -> BinaryIO:
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=upload, mode="rb")
    if head.startswith(b"BZh"):
        return bz2.BZ2File(upload, mode="rb")
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(upload, mode="rb")
    return upload


def _read_tar(stream: BinaryIO) -> dict[str, bytes]:
    budget = _Budget()
    # "r|" streams member by member from the bounded stream: nothing is read ahead, and every byte tarfile takes
    # (members, headers, padding) counts against the cap as it comes.
    members = 0
    # The stream's cap leaves room for a header and padding per member allowed (1 KB each) beyond the members' bytes.
    with tarfile.open(fileobj=io.BufferedReader(_Bounded(stream, budget.max_bytes + MAX_FILES * 1024, budget.max_bytes)), mode="r|") as tar:
        for member in tar:
            members += 1
            if members > MAX_FILES:
                raise ArchiveError(f"more than {MAX_FILES:,} files and folders; split the task set")
            if member.isdir():
                continue
            if not member.isreg():
                raise ArchiveError(f"{member.name}: links and special files are refused (a link could point outside the archive)")
            if budget.total + member.size > budget.max_bytes:
                raise ArchiveError(f"{member.name}: the archive inflates past {budget.max_bytes // (1024 * 1024)} MB (BELVEDIR_TASK_ARCHIVE_MAX_MB)")
            budget.add(member.name, tar.extractfile(member))
    return budget.files


def _read_zip(upload: BinaryIO) -> dict[str, bytes]:
    budget = _Budget()
    with zipfile.ZipFile(upload) as archive:
        members = archive.infolist()
        if len(members) > MAX_FILES * 2:  # directories count too; refuse a huge directory before walking it
            raise ArchiveError(f"more than {MAX_FILES:,} files; split the task set")
        for info in members:
            mode = info.external_attr >> 16
            if info.is_dir():
                continue
            # Zips made on Windows or by writestr() carry no file type at all: only a type that is not "file" is refused.
            if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                raise ArchiveError(f"{info.filename}: links and special files are refused (a link could point outside the archive)")
            with archive.open(info) as stream:
                budget.add(info.filename, stream)
    return budget.files


def pack(files: dict[str, bytes]) -> bytes:
    """Files as a gzipped tar, as stored for a task: scripts executable, the rest read-only to others."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", compresslevel=6) as tar:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size = len(files[path])
            info.mode = 0o755 if path.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(files[path]))
    return out.getvalue()


def unpack(blob: bytes, prefixes: tuple[str, ...] = ()) -> dict[str, bytes]:
    """A stored task's files, or only those under the given folders (`environment/` before the agent runs)."""
    files = {}
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for member in tar:
            if member.isreg() and (not prefixes or member.name.startswith(prefixes)):
                files[member.name] = tar.extractfile(member).read()
    return files
