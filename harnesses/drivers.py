"""The drivers shipped in drivers/, as read-only git repositories served over smart HTTP.

Each driver's repository is built from `drivers/<name>/` plus the helpers in
`drivers/_shared/` into a bare repository under `VAR_DIR/driver-repos/`, the
first time a process is asked for it. The single commit has a fixed author,
date and message, so the same files always make the same commit SHA: web
processes that build independently agree, and a harness pinned to a SHA keeps
working until the driver itself changes. `git http-backend` then answers the
fetch protocol (clone, ls-remote); pushing is refused before it is reached.
"""

import fcntl
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

SOURCE = Path(settings.BASE_DIR) / "drivers"
SHARED = "_shared"
# Never part of a driver repository: what trying a driver locally leaves behind.
CACHES = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc")
RUN_OUTPUTS = {"results.json", ".venv", "upstream", "node_modules", "out", "logs", "runs", "sb-cli-reports", "workspaces"}
CHUNK = 64 * 1024
COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "Belvedir",
    "GIT_AUTHOR_EMAIL": "drivers@belvedir.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "Belvedir",
    "GIT_COMMITTER_EMAIL": "drivers@belvedir.invalid",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
}

_built: dict[tuple[str, str], str] = {}  # (repos folder, driver) -> commit SHA, per process
_build_lock = threading.Lock()
# The endpoint is anonymous: a bound on backends per web process keeps a flood of
# clones from forking without limit (a clone of a driver takes well under a second).
MAX_BACKENDS = 8
BUSY_WAIT_SECONDS = 5
_backends = threading.BoundedSemaphore(MAX_BACKENDS)


class DriverError(Exception):
    pass


class Busy(DriverError):
    pass


def names() -> list[str]:
    """Every driver shipped with the platform (a folder of drivers/ with a README)."""
    if not SOURCE.is_dir():
        return []
    return sorted(p.name for p in SOURCE.iterdir() if not p.name.startswith(("_", ".")) and (p / "README.md").is_file())


def repos_root() -> Path:
    return Path(settings.VAR_DIR) / "driver-repos"


def base_url() -> str:
    """Where the presets' driver repos live: this platform, or a hosted organisation when one is set."""
    if settings.PRESET_REPO_ORG:
        return f"https://github.com/{settings.PRESET_REPO_ORG}"
    return f"{settings.BELVEDIR_BASE_URL}/drivers"


def is_platform_driver_url(url: str) -> bool:
    prefix = f"{settings.BELVEDIR_BASE_URL}/drivers/"
    return url.startswith(prefix) and url.removeprefix(prefix).removesuffix(".git") in names()


def _git(args, env=None, cwd=None) -> str:
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repos_root()), **(env or {})},
    )
    if result.returncode != 0:
        raise DriverError(f"git {args[0]} failed: {result.stderr.strip()[-300:]}")
    return result.stdout.strip()


def ensure_repo(name: str) -> str:
    """Build (or confirm) the bare repository of driver `name`; return its commit SHA."""
    if name not in names():
        raise DriverError(f"No driver named {name!r}.")
    root = repos_root()
    key = (str(root), name)
    with _build_lock:
        if key not in _built:
            root.mkdir(parents=True, exist_ok=True)
            # Web processes share the folder: one builds at a time.
            with open(root / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                _built[key] = _build(name, root / f"{name}.git")
        return _built[key]


def _build(name: str, bare: Path) -> str:
    if not (bare / "HEAD").exists():
        _git(["init", "--quiet", "--bare", "--initial-branch=main", str(bare)])
        _git(["config", "http.receivepack", "false"], env={"GIT_DIR": str(bare)})
    with tempfile.TemporaryDirectory(prefix=f"bv-driver-{name}-") as tmp:
        tree_dir = Path(tmp) / "tree"
        top = SOURCE / name

        def ignore(directory, entries):
            ignored = CACHES(directory, entries)
            return ignored | (RUN_OUTPUTS & set(entries)) if Path(directory) == top else ignored

        shutil.copytree(top, tree_dir, ignore=ignore)
        for item in (SOURCE / SHARED).iterdir():
            if item.is_file() and not (tree_dir / item.name).exists():
                shutil.copy2(item, tree_dir / item.name)
        env = {"GIT_DIR": str(bare), "GIT_WORK_TREE": str(tree_dir), "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(["add", "--all", "."], env=env, cwd=tree_dir)
        tree = _git(["write-tree"], env=env)
        current = _git(["rev-parse", "--verify", "--quiet", "refs/heads/main^{tree}"], env=env) if _has_main(bare) else ""
        if current == tree:
            return _git(["rev-parse", "refs/heads/main"], env=env)
        sha = _git(["commit-tree", tree, "-m", f"Belvedir driver: {name}"], env={**env, **COMMIT_ENV})
        _git(["update-ref", "refs/heads/main", sha], env=env)
        return sha


def _has_main(bare: Path) -> bool:
    return subprocess.run(["git", "--git-dir", str(bare), "rev-parse", "--verify", "--quiet", "refs/heads/main"], capture_output=True).returncode == 0


@dataclass
class BackendResponse:
    status: int
    headers: dict[str, str]
    body: object  # an iterator of bytes


def http_backend(name: str, path: str, method: str, query: str, body: bytes, headers: dict[str, str], timeout: int, max_bytes: int) -> BackendResponse:
    """Run `git http-backend` (CGI) for one request; the body streams out, bounded in bytes and time."""
    ensure_repo(name)
    if not _backends.acquire(timeout=BUSY_WAIT_SECONDS):
        raise Busy(f"More than {MAX_BACKENDS} driver clones at once; try again.")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(repos_root()),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_PROJECT_ROOT": str(repos_root()),
        "GIT_HTTP_EXPORT_ALL": "1",
        "PATH_INFO": f"/{name}.git/{path}",
        "REQUEST_METHOD": method,
        "QUERY_STRING": query,
        "CONTENT_TYPE": headers.get("content_type", ""),
        "CONTENT_LENGTH": str(len(body)),
    }
    if headers.get("content_encoding"):
        env["HTTP_CONTENT_ENCODING"] = headers["content_encoding"]
    if headers.get("git_protocol"):
        env["GIT_PROTOCOL"] = headers["git_protocol"]  # protocol v2, when the client asks for it
    try:
        process = subprocess.Popen(["git", "http-backend"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        _backends.release()
        raise
    stream = _BackendStream(process, threading.Timer(timeout, process.kill), max_bytes)
    # Written from a thread: the backend may answer before it has read everything.
    threading.Thread(target=_write_stdin, args=(process, body), daemon=True).start()
    try:
        status, response_headers = _read_cgi_headers(process)
    except Exception:
        stream.close()
        raise
    return BackendResponse(status, response_headers, stream)


def _write_stdin(process, body: bytes):
    try:
        process.stdin.write(body)
    except (BrokenPipeError, ValueError):
        pass
    finally:
        try:
            process.stdin.close()
        except (BrokenPipeError, ValueError):
            pass


def _read_cgi_headers(process) -> tuple[int, dict[str, str]]:
    status, headers = 200, {}
    for _ in range(100):  # CGI headers end at a blank line; a handful in practice
        line = process.stdout.readline(8192).decode("latin-1").rstrip("\r\n")
        if not line:
            break
        key, _, value = line.partition(":")
        if key.lower() == "status":
            status = int(value.strip().split()[0])
        else:
            headers[key.strip()] = value.strip()
    return status, headers


class _BackendStream:
    """The backend's body, in chunks; `close()` (Django calls it when the response ends, streamed
    or not) kills the backend and frees its slot, once."""

    def __init__(self, process, killer, max_bytes):
        self.process, self.killer, self.max_bytes = process, killer, max_bytes
        self.closed = False
        killer.start()

    def __iter__(self):
        sent = 0
        while chunk := self.process.stdout.read1(CHUNK):
            sent += len(chunk)
            if sent > self.max_bytes:
                break  # the client sees a truncated pack and fails loudly
            yield chunk
        self.close()

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.killer.cancel()
        self.process.kill()
        self.process.stdout.close()
        self.process.wait()
        _backends.release()
