"""The fake backend: sandboxes as temporary directories, their commands as plain processes of the worker.

For tests and the fast test tier, never production: a host may name it only
where settings.SANDBOX_ALLOW_FAKE_BACKEND is on, which only tests turn on
(`check --deploy` fails otherwise: belvedir.E007); elsewhere `backends.get`
refuses it, so a launch on such a host fails and its health check says why.

It keeps the parts of the contract (backend.py) that do not need a kernel's
help, and tests/test_backend_contract.py runs them against it: exit codes,
output tails and streaming, environment, deadlines (the whole sandbox
killed, SandboxTimeout with the tail), sessions, files in and out (missing,
too large), a kill from another thread, a stale sandbox of the same name
replaced, cleanup on exit, listing by installation and owner, removal and
reaping, a silent engine (`stop`) and a missing image.

What it cannot prove, and so does not claim (`capabilities` is empty; the
contract suite shows each absence, so the claim cannot drift from the truth):
- isolation: commands run as the worker's own user, with its network and
  files; an exec's `user` is accepted and ignored;
- limits: memory, processes, CPUs and disk are not bounded (the spec's
  limits are kept, not enforced), so nothing is ever out of memory;
- egress: no proxy socket is mounted, so an `egress` sandbox is refused at
  launch, as on a Docker host whose proxy is not running;
- diagnosis: with no init of its own, nothing the workload does stops the
  sandbox, and `diagnose` never blames it.
A process that leaves its process group (setsid) outlives the sandbox's kill.

Paths: a sandbox has no filesystem of its own; its root is a temporary
directory. Paths the API takes (files, workdirs) are placed under it, and
so are environment values under the writable places (HOME, /tmp); a path
written out in a command's text is the host's.

Engines: a fake engine is a name (the host's URL). Each keeps its sandboxes
in this process's memory, so they are listed and removed by the process
that made them (a reaper in another process sees none). `stop` silences an
engine as a stopped dockerd is silent, its sandboxes stopped; `start` wakes it.
"""

import logging
import os
import queue
import shutil
import signal
import stat
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from django.conf import settings

from .. import egress
from ..backend import Backend, Capability, EngineImage, ExecResult, ManagedSandbox, Sandbox, Session
from ..engine import Engine
from ..errors import (
    BackendUnavailable,
    ImageMissing,
    LaunchFailed,
    SandboxFileMissing,
    SandboxFileRefused,
    SandboxFileTooLarge,
    SandboxPlatformError,
    SandboxTimeout,
    SandboxUserError,
)
from ..output import TailBuffer
from ..spec import HOME, LABEL_INSTANCE, LABEL_OWNER_ID, LABEL_OWNER_KIND, SandboxSpec

logger = logging.getLogger(__name__)

RUNTIME = "fake"
# The one image every fake engine holds: the one `build_sandbox_image` would build for this configuration.
# Read once, so that a test pointing SANDBOX_IMAGE elsewhere finds it missing, as on Docker.
IMAGE = settings.SANDBOX_IMAGE
# The places a workload may write; environment values under them are moved into the sandbox's root.
WRITABLE = (HOME, "/tmp")
# After a command ends, how long its output may still trail in (a background child holding the pipe is not waited for).
DRAIN_SECONDS = 0.5


@dataclass
class _Engine:
    answering: bool = True
    sandboxes: dict[str, "FakeSandbox"] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_engines: dict[str, _Engine] = {}
_engines_lock = threading.Lock()


def _engine(url: str) -> _Engine:
    with _engines_lock:
        return _engines.setdefault(url, _Engine())


class FakeBackend(Backend):
    name = "fake"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, engine: Engine | str):
        super().__init__(engine)
        self._state = _engine(self.engine.url)

    def sandbox(self, spec: SandboxSpec) -> "FakeSandbox":
        return FakeSandbox(spec, self)

    def managed(self, owner_kind: str | None = None) -> list[ManagedSandbox]:
        self._answer()
        with self._state.lock:
            boxes = list(self._state.sandboxes.values())
        return [
            ManagedSandbox(name=box.name, owner_kind=box.labels[LABEL_OWNER_KIND], owner_id=box.labels[LABEL_OWNER_ID], status=box.status)
            for box in boxes
            if box.labels[LABEL_INSTANCE] == settings.SANDBOX_INSTANCE and owner_kind in (None, box.labels[LABEL_OWNER_KIND])
        ]

    def remove(self, name: str):
        self._answer()
        with self._state.lock:
            box = self._state.sandboxes.pop(name, None)
        if box is not None:
            box.destroy()

    def check(self, image: str, timeout: float):
        self._answer()
        if image != IMAGE:
            raise ImageMissing(f"The sandbox image {image!r} is missing on this host.")

    def image_id(self, tag: str) -> str | None:
        self._answer()
        return "fake:" + tag if tag == IMAGE else None

    def image_from_layer(self, base: str, layer: bytes, tag: str, labels: dict[str, str]):
        raise LaunchFailed("The fake backend builds no images: a task with RUN lines needs a Docker host.")

    def images(self, repository: str) -> list[EngineImage]:
        self._answer()
        return []  # it builds none, and its one image is no repository's to prune

    def remove_image(self, tag: str) -> bool:
        return False

    def runtimes(self) -> frozenset[str]:
        self._answer()
        return frozenset({RUNTIME})

    def cpus(self) -> int:
        return os.cpu_count() or 0

    def stop(self):
        """The engine falls silent, as a stopped dockerd: its sandboxes stop, and every call is BackendUnavailable."""
        self._state.answering = False
        with self._state.lock:
            boxes = list(self._state.sandboxes.values())
        for box in boxes:
            box.stop_processes()

    def start(self):
        self._state.answering = True

    def _answer(self):
        if not self._state.answering:
            raise BackendUnavailable(f"Fake engine at {self.engine.url} is unreachable.")

    def _register(self, box: "FakeSandbox"):
        with self._state.lock:
            stale = self._state.sandboxes.pop(box.name, None)
            self._state.sandboxes[box.name] = box
        if stale is not None:
            stale.destroy()

    def _unregister(self, box: "FakeSandbox"):
        with self._state.lock:
            if self._state.sandboxes.get(box.name) is box:
                del self._state.sandboxes[box.name]


class FakeSandbox(Sandbox):
    def __init__(self, spec: SandboxSpec, backend: FakeBackend):
        self.spec = spec
        self.backend = backend
        self.runtime = RUNTIME
        self.name = spec.name
        self.labels: dict[str, str] = {}
        self.root: Path | None = None
        self.status = "created"
        self._processes: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> Self:
        backend, spec = self.backend, self.spec
        self.runtime = backend.runtime(spec.runtime)
        if self.runtime != RUNTIME:
            raise LaunchFailed(f"Could not start the sandbox: the fake engine has no runtime {self.runtime!r}.")
        backend.check(spec.image, timeout=0)
        if spec.network == egress.NETWORK:
            raise LaunchFailed("The fake backend has no egress proxy; use network none.")
        if spec.gpu:
            raise LaunchFailed("The fake backend has no GPUs.")
        if spec.mounts:
            raise LaunchFailed("The fake backend mounts nothing from the host.")
        # The name and labels as they are now, as a container's are fixed at its creation.
        self.name, self.labels = spec.name, dict(spec.labels)
        self.root = Path(tempfile.mkdtemp(prefix=f"bv-fake-{self.name}-"))
        for place in (*WRITABLE, *(folder.path for folder in spec.folders)):
            self._path(place).mkdir(parents=True, exist_ok=True)
        self.status = "running"
        backend._register(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.root is None:
            return
        if not self.backend._state.answering:
            # As with Docker: what a silent engine holds, the reaper removes once it answers.
            logger.warning("could not remove sandbox %s", self.name)
            return
        self.backend._unregister(self)
        self.destroy()

    def destroy(self):
        self.stop_processes()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def stop_processes(self):
        self.status = "exited"
        with self._lock:
            processes = list(self._processes)
        for process in processes:
            _kill_group(process)

    # -- work --------------------------------------------------------------

    def exec(
        self,
        command: str | list[str],
        *,
        timeout: float,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        tail_bytes: int = 16384,
        on_output: Callable[[bytes], None] | None = None,
    ) -> ExecResult:
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        started = time.monotonic()
        tail = TailBuffer(tail_bytes)
        try:
            process = self._spawn(argv, env, self._path(workdir or self.spec.workdir), stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        except OSError as exc:
            # What the engine answers for a command it cannot start (no such program, no such workdir).
            return ExecResult(exit_code=126, output=f"exec failed: {exc}\n", duration=time.monotonic() - started)

        def pump():
            while chunk := process.stdout.read1(65536):
                tail.write(chunk)
                if on_output:
                    on_output(chunk)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            reader.join(DRAIN_SECONDS)
            raise SandboxTimeout(f"Timed out after {timeout:g} s.", output=tail.text()) from None
        # A child left running in the background may hold the output open: the command is over all the same.
        reader.join(DRAIN_SECONDS)
        if not reader.is_alive():
            process.stdout.close()
        if self.status != "running":
            # Killed by the platform (a cancel, the reaper, the engine stopping) while it ran.
            raise SandboxPlatformError(f"The sandbox stopped during a command (exit code {_exit_code(process.returncode)}).")
        return ExecResult(exit_code=_exit_code(process.returncode), output=tail.text(), duration=time.monotonic() - started)

    def open_session(self, argv: list[str], *, env: dict[str, str] | None = None, user: str | None = None, workdir: str | None = None) -> "FakeSession":
        try:
            process = self._spawn(argv, env, self._path(workdir or self.spec.workdir), stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            raise SandboxPlatformError(f"Could not start a session: {exc}") from exc
        return FakeSession(process, on_close=self._forget)

    def put_archive(self, directory: str, chunks: Iterable[bytes], *, user: str | None = None):
        target = self._path(directory)
        try:
            target.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile() as spool:
                for chunk in chunks:
                    spool.write(chunk)
                spool.seek(0)
                with tarfile.open(fileobj=spool, mode="r:") as archive:
                    # The data filter: no member lands outside `target`, none keeps its owner or special bits.
                    archive.extractall(target, filter="data")
        except (OSError, tarfile.TarError) as exc:
            raise LaunchFailed(f"Could not place files in the sandbox: {exc}") from exc

    def read_file(self, path: str, max_bytes: int) -> bytes:
        local = self._path(path)
        if not local.is_file():
            raise SandboxFileMissing(f"{path} was not written.")
        with open(local, "rb") as f:
            result = f.read(max_bytes + 1)
        if len(result) > max_bytes:
            raise SandboxFileTooLarge(f"{path} is larger than {max_bytes} bytes.")
        return result

    def end_processes(self, user: str) -> bool:
        # Its processes are the worker's own, of whatever user: every one the sandbox started goes (its group).
        with self._lock:
            processes = list(self._processes)
        for process in processes:
            _kill_group(process)
        return True

    def fetch(self, path: str, max_bytes: int) -> bytes:
        if not any(path.startswith(folder.path + "/") for folder in self.spec.folders if folder.outside):
            raise SandboxFileRefused(f"{path} is in no folder the platform reads from outside.")
        try:
            # O_NOFOLLOW and a non-blocking open: a link is refused, not followed, and a named pipe never blocks.
            fd = os.open(self._path(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise SandboxFileMissing(f"{path} was not written.") from None
        except OSError as exc:
            raise SandboxFileRefused(f"{path} is not a regular file ({exc.strerror}); it was not read.") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise SandboxFileRefused(f"{path} is not a regular file; it was not read.")
            result = f.read(max_bytes + 1)
        if len(result) > max_bytes:
            raise SandboxFileTooLarge(f"{path} is larger than {max_bytes} bytes.")
        return result

    def kill(self):
        self.stop_processes()

    def diagnose(self, *, check_limits: bool = True) -> SandboxUserError | None:
        return None

    # -- pieces ------------------------------------------------------------

    def _path(self, path: str) -> Path:
        """Where a sandbox path lives on the host: under the sandbox's root."""
        return self.root / os.path.normpath(path).lstrip("/")

    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        # Only what a container's exec would have: none of the worker's own environment (its secrets) leaks in.
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": HOME, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
        merged = {**base, **(env or {})}
        return {name: str(self._path(value)) if _under_writable(value) else value for name, value in merged.items()}

    def _spawn(self, argv: list[str], env, cwd: Path, **streams) -> subprocess.Popen:
        with self._lock:
            if self.status != "running":
                raise SandboxPlatformError("The sandbox is not running.")
            # Its own process group, kept until the sandbox goes: a kill reaches the command's
            # children too, those it left in the background included, as a container's end does.
            process = subprocess.Popen(argv, cwd=cwd, env=self._env(env), stdout=subprocess.PIPE, start_new_session=True, **streams)
            self._processes.add(process)
        return process

    def _forget(self, process: subprocess.Popen):
        with self._lock:
            self._processes.discard(process)


class FakeSession(Session):
    def __init__(self, process: subprocess.Popen, on_close: Callable[[subprocess.Popen], None]):
        self._process = process
        self._on_close = on_close
        self._lines: queue.Queue = queue.Queue()
        self.stderr = TailBuffer(4096)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self):
        try:
            for line in self._process.stdout:
                self._lines.put(line.rstrip(b"\n"))
        except (OSError, ValueError):  # closed under us
            pass
        finally:
            self._lines.put(None)

    def _read_stderr(self):
        try:
            while chunk := self._process.stderr.read1(4096):
                self.stderr.write(chunk)
        except (OSError, ValueError):
            pass

    def send(self, data: bytes):
        try:
            self._process.stdin.write(data)
            self._process.stdin.flush()
        except (OSError, ValueError) as exc:
            raise SandboxPlatformError(f"The sandbox session closed: {exc}") from exc

    def read_line(self, timeout: float | None) -> bytes | None:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise SandboxTimeout(f"No answer within {timeout:g} s.") from None

    def close(self):
        _kill_group(self._process)
        try:
            self._process.stdin.close()
        except OSError:
            pass  # its reader is gone: nothing to flush to
        self._on_close(self._process)


def _kill_group(process: subprocess.Popen):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _exit_code(returncode: int) -> int:
    # A process killed by a signal: the shell's and the engine's 128 + signal number.
    return 128 - returncode if returncode < 0 else returncode


def _under_writable(value: str) -> bool:
    return any(value == place or value.startswith(place + "/") for place in WRITABLE)


def leftovers() -> list[str]:
    """The sandboxes every fake engine of this process still holds: tests check that none outlives its test."""
    with _engines_lock:
        engines = list(_engines.values())
    return sorted(name for engine in engines for name in engine.sandboxes)


def reset():
    """Every fake engine forgotten, its sandboxes removed: the next test starts on answering, empty engines."""
    with _engines_lock:
        engines = list(_engines.values())
        _engines.clear()
    for engine in engines:
        for box in list(engine.sandboxes.values()):
            box.destroy()
