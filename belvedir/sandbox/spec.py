from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings

from .owners import Owner

if TYPE_CHECKING:
    from .images import ImageRecipe

LABEL_MANAGED = "belvedir.managed"
LABEL_OWNER_KIND = "belvedir.owner.kind"
LABEL_OWNER_ID = "belvedir.owner.id"
LABEL_INSTANCE = "belvedir.instance"
# On a volume: the sandbox (container) it belongs to, so the volume goes with it.
LABEL_SANDBOX = "belvedir.sandbox"
HOME = "/home/sandbox"
# Who owns what in a sandbox. The workload runs as the sandbox user; a verifier (an agent task's tests) as a user of
# its own, which no process of the workload can signal, trace or write as; what the platform puts in for the
# verifier belongs to root, whom no one in a sandbox can act as (no capabilities, no setuid: no-new-privileges).
SANDBOX_UID = 1000
VERIFIER_UID = 1001
# By uid alone: the engine then gives it its groups from the image (sandbox's too, to read and add to the agent's
# folders, group-writable for it; with "uid:gid" it would get none).
VERIFIER_USER = str(VERIFIER_UID)
VERIFIER_HOME = "/home/verifier"
# Programs from the image's own read-only folders only: what the platform runs in a sandbox (and a verifier) finds no
# program the workload planted, whatever the image's or the workload's PATH put first.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ROOT_USER = "0:0"
UIDS = {"sandbox": SANDBOX_UID, "verifier": VERIFIER_UID, "root": 0}


@dataclass(frozen=True)
class Folder:
    """A writable folder over the sandbox's read-only root (besides its home and /tmp): a tmpfs whose pages count
    against the sandbox's memory, owned by `owner` (a key of UIDS) with `mode`. A folder `outside` is read by the
    platform from outside the sandbox, through the engine (`Sandbox.fetch`), so no command inside it resolves what
    is read: on Docker it is a tmpfs volume of its own, which the engine's archive API can read."""

    path: str
    owner: str = "sandbox"
    mode: int = 0o755
    outside: bool = False

    @property
    def uid(self) -> int:
        return UIDS[self.owner]


@dataclass(frozen=True)
class Limits:
    memory_mb: int
    cpus: float
    pids: int
    # The writable parts of the sandbox are tmpfs mounts whose pages count
    # against memory_mb, so a disk-filling sandbox hits its own limit, never
    # the host's disk.
    home_mb: int = 0
    tmp_mb: int = 256

    @classmethod
    def defaults(cls, **overrides) -> "Limits":
        values = dict(memory_mb=settings.SANDBOX_MEMORY_MB, cpus=settings.SANDBOX_CPUS, pids=settings.SANDBOX_PIDS)
        values.update(overrides)
        return cls(**values)

    @property
    def home_size_mb(self) -> int:
        return self.home_mb or self.memory_mb


@dataclass(frozen=True)
class ReadOnlyMount:
    """A host path seen read-only inside the sandbox (the local model and its runtime: belvedir/localmodel/mounts.py)."""

    source: str
    target: str


@dataclass(frozen=True)
class GpuRequest:
    device_ids: tuple[str, ...]


@dataclass
class SandboxSpec:
    """What to launch. The container name is deterministic (`bv-<kind>-<id>`, then `-<part>` for a workload's further containers)."""

    owner: Owner
    image: str = field(default_factory=lambda: settings.SANDBOX_IMAGE)
    limits: Limits = field(default_factory=Limits.defaults)
    # A Docker network mode, or `egress`: network none plus the egress proxy (sandbox/egress/).
    network: str = field(default_factory=lambda: settings.SANDBOX_NETWORK)
    # runc, runsc, or auto: runsc when the engine has it.
    runtime: str = "auto"
    gpu: GpuRequest | None = None
    mounts: tuple[ReadOnlyMount, ...] = ()
    workdir: str = HOME
    user: str = field(default_factory=lambda: settings.SANDBOX_USER)
    # A workload of several containers (an eval's scoring sandboxes under
    # gVisor) numbers the others from 1; all carry the owner's labels.
    part: int = 0
    # Further writable folders (tmpfs counted against memory like /tmp) on the read-only root: an agent task's /app,
    # /tests and /logs, which its scripts name by absolute path. A path is a Folder of the sandbox user's.
    writable: tuple["str | Folder", ...] = ()
    # Built on `image` (its base) from this recipe (a task's RUN lines) when the host lacks it; the door then starts
    # the sandbox from the built image (images.py).
    recipe: "ImageRecipe | None" = None
    # Non-zero: an image build's sandbox (images.py). Root may write its whole filesystem, which the build runtime
    # holds in the sandbox's memory; it stops by itself this many seconds after it starts, whoever holds it; and a
    # running container of its name is another build of the same image in progress, not a stale one to replace.
    build_seconds: float = 0

    @property
    def folders(self) -> tuple[Folder, ...]:
        return tuple(f if isinstance(f, Folder) else Folder(f) for f in self.writable)

    @property
    def name(self) -> str:
        return f"{self.owner.container_name}-{self.part}" if self.part else self.owner.container_name

    @property
    def labels(self) -> dict[str, str]:
        return {
            LABEL_MANAGED: "1",
            LABEL_INSTANCE: settings.SANDBOX_INSTANCE,
            LABEL_OWNER_KIND: self.owner.kind,
            LABEL_OWNER_ID: self.owner.id,
        }
