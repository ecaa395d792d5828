"""What an agent produced: the outputs its task declares, copied out of the sandbox after its phase, kept per trial
(bounded, content-hashed) and what a sealed verifier or a regrade grades.

A task declares them in task.toml (Belvedir's own keys; Harbor ignores keys it does not know):

    [verifier]
    outputs = ["/app/greeting.txt", "/app/notes"]   # files or folders under the task's writable folders
    mode = "sealed"                                  # or "in_place", the default

They are packed in the sandbox once every process of the agent is gone (by the system's own tar, as the agent's
user, into a folder the platform reads from outside: `export`), and read here as untrusted bytes: only regular
files, folders and links inside the declared outputs are kept; a link pointing elsewhere, a hard link, a named
pipe and anything else are dropped, and each drop is said (`Outputs.dropped`). The digest is over what is kept,
so two trials that produced the same outputs have the same digest.
"""

import gzip
import hashlib
import io
import posixpath
import tarfile
from dataclasses import dataclass, field

from django.conf import settings

from belvedir.sandbox.backend import Sandbox
from belvedir.sandbox.errors import SandboxError, SandboxFileTooLarge
from belvedir.sandbox.output import clean_output
from belvedir.sandbox.spec import SYSTEM_PATH, Folder

EXPORT_DIR = "/.belvedir-export"
EXPORT_FILE = f"{EXPORT_DIR}/outputs.tar"
MAX_DECLARED = 100


class OutputsTooLarge(SandboxError):
    """The agent's outputs are past the copy limit: its doing, so charged."""


@dataclass
class Outputs:
    """The kept outputs: {path under /: (kind, mode, bytes or link target)}, kind "file", "dir" or "link"."""

    entries: dict[str, tuple[str, int, bytes]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(len(data) for kind, _, data in self.entries.values() if kind == "file")

    @property
    def digest(self) -> str:
        """SHA-256 over each entry in path order (its kind, its executable bit, its bytes or link target), length-prefixed."""
        sha = hashlib.sha256()
        for path in sorted(self.entries):
            kind, mode, data = self.entries[path]
            head = f"{kind}\0{path}\0{'x' if mode & 0o111 else '-'}\0".encode()
            sha.update(len(head).to_bytes(8, "big") + head + len(data).to_bytes(8, "big") + data)
        return sha.hexdigest()

    def tar(self) -> bytes:
        """A plain tar of the entries, paths relative to /, to put into a sandbox (owned by whoever unpacks it)."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for path in sorted(self.entries):
                kind, mode, data = self.entries[path]
                info = tarfile.TarInfo(path.lstrip("/"))
                info.mode = mode & 0o777
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    archive.addfile(info)
                elif kind == "link":
                    info.type, info.linkname = tarfile.SYMTYPE, data.decode("utf-8", "replace")
                    archive.addfile(info)
                else:
                    info.size = len(data)
                    archive.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    def archive(self) -> bytes:
        """As stored: the tar, gzipped."""
        return gzip.compress(self.tar(), compresslevel=6, mtime=0)

    @classmethod
    def from_archive(cls, blob: bytes, declared: list[str]) -> "Outputs":
        return read(gzip.decompress(blob), declared)


def declared(config: dict) -> list[str]:
    """The outputs a task's config declares ([verifier] outputs), as normalised absolute paths."""
    return [posixpath.normpath(p) for p in config.get("verifier", {}).get("outputs") or []]


def mode(config: dict) -> str:
    return config.get("verifier", {}).get("mode") or "in_place"


def check(config: dict, writable: tuple[str, ...]) -> str:
    """Why a task's declared outputs or verifier mode cannot be, or ""; `writable` are the task's writable folders."""
    verifier = config.get("verifier", {})
    outputs, wanted = verifier.get("outputs"), verifier.get("mode", "in_place")  # its value: harbor_format.KEYS
    if outputs is None:
        return '[verifier] mode "sealed" grades the declared outputs: declare them with [verifier] outputs' if wanted == "sealed" else ""
    if not isinstance(outputs, list) or not all(isinstance(p, str) for p in outputs) or not 0 < len(outputs) <= MAX_DECLARED:
        return f"[verifier] outputs is a list of 1 to {MAX_DECLARED} absolute paths"
    for path in outputs:
        normal = posixpath.normpath(path) if path.startswith("/") else ""
        if not normal or ".." in path.split("/") or "\x00" in path or len(path) > 500:
            return f"[verifier] outputs: {path[:80]!r} is not an absolute path without '..'"
        if not any(normal.startswith(place + "/") or normal == place for place in writable):
            folders = ", ".join(writable) or "none (give the Dockerfile a WORKDIR)"
            return f"[verifier] outputs: {path[:80]!r} is in no folder the agent can write; the task's are {folders}"
    return ""


def export_folder() -> Folder:
    """Where the outputs are packed: the agent's user's, read by the platform from outside."""
    return Folder(EXPORT_DIR, mode=0o700, outside=True)


def export(box: Sandbox, paths: list[str]) -> bytes:
    """The declared outputs packed in the sandbox (once no process of the agent is left) and read from outside: the
    system's own tar, as the agent's user (its files may be its alone), links stored as links. OutputsTooLarge past
    settings.TRIAL_OUTPUTS_MAX_MB, the export folder's size."""
    most = settings.TRIAL_OUTPUTS_MAX_MB
    relative = " ".join(_quote(p.lstrip("/")) for p in paths)
    # Removed first: a link the agent left at the archive's path would otherwise be written through.
    script = f"rm -rf {EXPORT_FILE} && cd / && exec /bin/tar --ignore-failed-read --warning=no-failed-read -cf {EXPORT_FILE} -- {relative}"
    packed = box.exec(["/bin/sh", "-c", script], timeout=120, env={"PATH": SYSTEM_PATH}, workdir="/", tail_bytes=2048)
    if packed.exit_code != 0:
        if "No space left" in packed.output:
            raise OutputsTooLarge(f"The agent's outputs are larger than the copy limit of {most} MB (BELVEDIR_TRIAL_OUTPUTS_MAX_MB); none were kept.")
        raise OutputsTooLarge(f"The agent's outputs could not be copied out: {clean_output(packed.output, 300)}")
    try:
        return box.fetch(EXPORT_FILE, most * 2**20)
    except SandboxFileTooLarge:
        raise OutputsTooLarge(f"The agent's outputs are larger than the copy limit of {most} MB (BELVEDIR_TRIAL_OUTPUTS_MAX_MB); none were kept.") from None


def _quote(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"


def read(raw: bytes, paths: list[str]) -> Outputs:
    """The tar's members inside the declared outputs, as untrusted bytes: what is not a file, a folder or a link
    staying inside them is dropped, and said."""
    found = Outputs()
    roots = [p.lstrip("/") for p in paths]
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as archive:
        for member in archive:
            name = posixpath.normpath(member.name.lstrip("/"))
            shown = clean_output("/" + name, 200)
            if name.startswith("..") or not any(name == r or name.startswith(r + "/") for r in roots):
                found.dropped.append(f"{shown}: outside the declared outputs")
            elif member.isdir():
                found.entries["/" + name] = ("dir", member.mode, b"")
            elif member.isreg():
                found.entries["/" + name] = ("file", member.mode, archive.extractfile(member).read())
            elif member.issym():
                target = (
                    posixpath.normpath(posixpath.join(posixpath.dirname(name), member.linkname))
                    if not member.linkname.startswith("/")
                    else member.linkname.lstrip("/")
                )
                if any(target == r or target.startswith(r + "/") for r in roots):
                    found.entries["/" + name] = ("link", member.mode, member.linkname.encode())
                else:
                    found.dropped.append(f"{shown}: a link to {clean_output(member.linkname, 120)!r}, outside the declared outputs")
            else:
                kind = "a hard link" if member.islnk() else "a named pipe" if member.isfifo() else "a special file"
                found.dropped.append(f"{shown}: {kind}")
    return found
