"""The contract of a sandbox backend: what a sandbox, and the engine behind it, must do.

Apps never hold a backend: they open a workload with `launch.workload` (or
`launch.layout`, several sandboxes at once) and talk to the `Sandbox` it
yields. Each SandboxHost names its backend (`SandboxHost.backend`), and
`backends.for_host` makes one for it. Docker is one backend
(backends/docker.py and its engine and sandbox modules), the in-memory fake
another (backends/fake.py); tests/test_backend_contract.py is what a new one
(Kubernetes: docs/kubernetes.md) has to pass.

From Inspect AI's `SandboxEnvironment` (src/inspect_ai/util/_sandbox/
environment.py): a sandbox is an abstract class of a few operations (`exec`,
`read_file`, `write_file`), each provider a subclass chosen by name (there
`@sandboxenv("docker")`, here a host's `backend` field). Not taken: its
registry filled by decorators at import (the table of backends is written
out in backends/__init__.py, so which exist is read in one place), nor its
per-sample init and cleanup class methods (a lease and the reaper,
launch.py and reaper.py, own a workload's life here).

From Read the Docs' `BaseBuildEnvironment` (doc_builder/environments.py): the
environment is a context manager that always cleans up on exit, the caller
never knows which subclass runs its commands (`DockerBuildEnvironment`, or
`LocalBuildEnvironment`, which runs them on the host as our fake does), and
failures are split into the user's and the platform's (errors.py) the same
way whichever subclass raised them.

What only some backends can prove is a capability (`Capability`): the
contract suite runs a capability's tests only for the backends that claim
it, and shows for the others that they do not have it.
"""

import io
import tarfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Self

from .engine import Engine, as_engine
from .errors import SandboxUserError
from .output import TailBuffer
from .spec import SandboxSpec

# The runtimes auto prefers, in order: gVisor's own kernel first.
PREFERRED_RUNTIMES = ("runsc", "runc")


class Capability(StrEnum):
    """What a backend can prove beyond running commands, files, deadlines, sessions, listing and cleanup."""

    # The workload runs as an unprivileged uid with no capabilities on a
    # read-only root, cannot reach the host (network none, no engine socket),
    # and cannot signal processes of another uid in its sandbox (the keeper's).
    ISOLATION = "isolation"
    # Memory, processes and disk are bounded by the sandbox, not the host.
    LIMITS = "limits"
    # A command killed for memory is SandboxOutOfMemory, not an exit code.
    OOM = "oom"
    # The `egress` network: the host's proxy socket mounted, reached through a forwarder.
    EGRESS = "egress"
    # Images built from a recipe in a build sandbox, kept by the engine under their digest's tag (images.py).
    BUILD = "build"


@dataclass
class ExecResult:
    exit_code: int
    output: str
    duration: float


@dataclass(frozen=True)
class ManagedSandbox:
    """One sandbox a backend lists as this installation's: what the reaper decides on."""

    name: str
    owner_kind: str | None
    owner_id: str | None
    # The engine's word: running, exited, created…
    status: str

    @property
    def running(self) -> bool:
        return self.status == "running"


@dataclass(frozen=True)
class EngineImage:
    """One tag of an image on a backend's engine, as `images` lists them: what pruning decides on."""

    tag: str
    created: float  # seconds since the epoch
    size: int  # bytes, its base's included
    labels: dict[str, str]


class Session(ABC):
    """Line-oriented talk with one long-lived process: `send` to its stdin, `read_line` from its stdout."""

    # The last bytes it wrote on stderr, for the message when it fails.
    stderr: TailBuffer

    @abstractmethod
    def send(self, data: bytes):
        """SandboxPlatformError once the process or the sandbox is gone."""

    @abstractmethod
    def read_line(self, timeout: float | None) -> bytes | None:
        """The next stdout line without its newline; None once the process has ended. SandboxTimeout past `timeout`."""

    @abstractmethod
    def close(self):
        """Stop talking; the process ends with its stdin, or with the sandbox."""


class Sandbox(ABC):
    """One sandbox: started on enter, removed on exit whatever happened, a stale one of its name replaced.

    Work runs in it as commands (`exec`) or sessions; files go in and come
    out. A command past its deadline kills the sandbox (SandboxTimeout);
    the workload's failures are SandboxUserError, the platform's
    SandboxPlatformError (errors.py), whichever backend runs it.
    """

    spec: SandboxSpec
    # The runtime it runs under, resolved (never auto).
    runtime: str

    @abstractmethod
    def __enter__(self) -> Self: ...

    @abstractmethod
    def __exit__(self, exc_type, exc, tb): ...

    @abstractmethod
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
        """Run a command to completion (a string goes to `sh -c`), keeping the last `tail_bytes` of stdout and stderr.

        Past `timeout` seconds the whole sandbox is killed and SandboxTimeout
        raised with the output's tail. `on_output` hears every chunk as it comes.
        """

    @abstractmethod
    def open_session(self, argv: list[str], *, env: dict[str, str] | None = None, user: str | None = None, workdir: str | None = None) -> Session:
        """A long-lived process fed through stdin and read line by line from stdout."""

    @abstractmethod
    def put_archive(self, directory: str, chunks: Iterable[bytes], *, user: str | None = None):
        """Unpack a tar stream into `directory` (created if needed), owned by `user` (the sandbox user by default)."""

    def put_files(self, directory: str, files: dict[str, bytes], mode: int = 0o644, *, user: str | None = None):
        """Write files under `directory` (created if needed); names may hold subdirectories."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for name, content in files.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(content), mode, int(time.time())
                archive.addfile(info, io.BytesIO(content))
        self.put_archive(directory, [buffer.getvalue()], user=user)

    @abstractmethod
    def read_file(self, path: str, max_bytes: int) -> bytes:
        """A file's content, read by a command inside the sandbox; SandboxFileMissing or SandboxFileTooLarge otherwise."""

    @abstractmethod
    def end_processes(self, user: str) -> bool:
        """Every process of `user` in the sandbox killed, again while any is left (a fork bomb's children too), the
        sandbox itself left running; False when some still outlive many rounds of SIGKILL."""

    @abstractmethod
    def fetch(self, path: str, max_bytes: int) -> bytes:
        """A regular file of one of its `outside` folders (spec.Folder), read from outside the sandbox: nothing in it
        runs, so nothing the workload planted can answer for the file. SandboxFileMissing, SandboxFileTooLarge, or
        SandboxFileRefused for anything but a regular file (a link is not followed)."""

    @abstractmethod
    def kill(self):
        """Stop everything in it now (a timeout, a cancel): the platform's doing, so `diagnose` blames no one."""

    @abstractmethod
    def diagnose(self, *, check_limits: bool = True) -> SandboxUserError | None:
        """Why the sandbox stopped or chokes, if the workload caused it; None when it did not (or it cannot tell)."""


class Backend(ABC):
    """Where sandboxes run: one engine (a host's), and what can be asked of it."""

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[Capability]]

    def __init__(self, engine: Engine | str):
        self.engine = as_engine(engine)

    @abstractmethod
    def sandbox(self, spec: SandboxSpec) -> Sandbox:
        """The sandbox for `spec`, not started yet: entering it starts it."""

    @abstractmethod
    def managed(self, owner_kind: str | None = None) -> list[ManagedSandbox]:
        """Every sandbox this installation (settings.SANDBOX_INSTANCE) has on the engine, of one owner kind or all."""

    @abstractmethod
    def remove(self, name: str):
        """Removed (or being removed by another) when this returns, else BackendUnavailable. A missing one is no error."""

    @abstractmethod
    def check(self, image: str, timeout: float):
        """BackendUnavailable when the engine does not answer within `timeout`, ImageMissing when it lacks `image`."""

    @abstractmethod
    def runtimes(self) -> frozenset[str]:
        """The runtimes the engine offers."""

    @abstractmethod
    def cpus(self) -> int:
        """The engine host's CPU count (0 when it does not say)."""

    @abstractmethod
    def image_id(self, tag: str) -> str | None:
        """The id (content digest) of the engine's image of this tag; None when it has none."""

    @abstractmethod
    def image_from_layer(self, base: str, layer: bytes, tag: str, labels: dict[str, str]):
        """An image `tag`: `base` with the tar `layer` laid over its root, and `labels`; nothing of it runs on the host.
        LaunchFailed where the backend cannot build (no Capability.BUILD)."""

    @abstractmethod
    def images(self, repository: str) -> list[EngineImage]:
        """The engine's images of this repository, one entry per tag."""

    @abstractmethod
    def remove_image(self, tag: str) -> bool:
        """The image of this tag removed (or already gone); False when a container holds it, and it stays."""

    def runtime(self, wanted: str) -> str:
        """The runtime a sandbox asking for `wanted` gets here (see `resolve_runtime`)."""
        return resolve_runtime(wanted, self.runtimes())


def resolve_runtime(wanted: str, offered: frozenset[str]) -> str:
    """`wanted` itself, or for auto the first of PREFERRED_RUNTIMES on offer (else the engine's only kind)."""
    if wanted != "auto":
        return wanted
    return next((r for r in PREFERRED_RUNTIMES if r in offered), None) or min(offered, default=PREFERRED_RUNTIMES[-1])


def concurrency_per_sandbox(runtime: str, concurrency: int) -> int:
    """How many of a workload's `concurrency` busy processes one sandbox should hold under `runtime` (resolved);
    the workload lays the rest out in sandboxes of their own (an eval's scorers: evals/code_sandbox.py).

    Under gVisor, one: on its ptrace platform the processes of one sandbox
    wait on each other to fork and to fault pages in. With the same CPU,
    4 sandboxes of one slot scored ~1.4 times as fast as one of 4 slots
    (45.8 against 65 ms a sample on one core in all, 21-23 against 30.4 on
    two; docs/developing/bench/humaneval-sandbox.md). Under runc (and the fake's plain processes) the
    kernel runs a sandbox's processes side by side, and one sandbox is cheapest.
    """
    return 1 if is_gvisor(runtime) else concurrency


def is_gvisor(runtime: str) -> bool:
    """runsc, or an engine's variant of it (images.BUILD_RUNTIME: the same kernel with its root held in memory)."""
    return runtime.startswith("runsc")
