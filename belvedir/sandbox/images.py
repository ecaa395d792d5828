"""Images built from a recipe, offline and inside a sandbox: how an agent task's `RUN` lines become an image.

No registry and no network are at hand, and a build runs its author's commands as root: hostile code like any
other. So a build is a workload of the sandbox like any other, entered through the same door (`launch.start`
builds a spec's missing image first):

- its steps run in a build sandbox from the base image, network none, under gVisor with the root filesystem held
  in the sandbox's memory (the engine's `runsc-build` runtime, registered by scripts/ensure_docker.sh): a step
  that fills the disk fills its own memory limit, never the host's disk;
- what the steps wrote is read out as one tar (each path whose ctime is past the build's start: a step can set a
  file's mtime, never its ctime) and laid over the base by a Dockerfile of ADD and LABEL, which the engine applies
  without starting anything on the host;
- the image's tag is the hash of everything the build reads: the recipe's digest (each step, the files copied
  in) and the base image's own id on that engine (a rebuilt sandbox image is another base). The same build
  context is built once per engine and then found. Two workers wanting the same image meet on the engine: the
  build sandbox is named by the tag, an engine holds one container of a name, and the second waits for the
  first's image.

A sandbox mounts its writable folders (an agent task's /app) as empty tmpfs over the image; what the build left
in them is kept at SEED_DIR and copied into the mounts when a sandbox of the image starts (docker_sandbox.py).

Not captured: a file a step deletes from the base image stays in the built one (the layer holds what was written).
"""

import hashlib
import io
import json
import logging
import shlex
import tarfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings

from .backend import Backend, Capability
from .errors import BuildInProgress, ImageBuildFailed, ImageMissing, LaunchFailed, SandboxOutOfMemory, SandboxPlatformError, SandboxTimeout, SandboxUserError
from .owners import Owner
from .spec import Limits, SandboxSpec

logger = logging.getLogger(__name__)

BUILD_RUNTIME = "runsc-build"
BUILT_REPOSITORY = "belvedir-built"
OWNER_KIND = "build"
LABEL_SEED = "belvedir.seed"
LABEL_RECIPE = "belvedir.recipe"
# What the build wrote, in bytes: the image's own share of the engine's disk (its base's layers are the sandbox
# image's, shared).
LABEL_LAYER_BYTES = "belvedir.layer-bytes"
# A built image this young is never pruned: a trial that has just built or found it is about to start from it.
PRUNE_GRACE_SECONDS = 3600
SEED_DIR = "/.belvedir-seed"
# Inside the build sandbox, under its in-memory root.
MARKER = "/.belvedir-build-start"
LAYER = "/.belvedir-layer.tar"
BUILD_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID"]
WAIT_SECONDS = 1.0
# A build sandbox outlives its steps' time limit by this much, for packing, reading and tagging what they wrote.
LIFETIME_MARGIN = 120
# The packing command's exit code for a seeded folder that no sandbox could hold.
TOO_BIG = 3


@dataclass(frozen=True)
class Copy:
    """Files into the image: {absolute path: bytes}, as a Dockerfile's COPY lines name them."""

    files: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Run:
    """A command run as root with `sh -c` (or an argv), where the Dockerfile's line `line` ran it."""

    command: str | tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    workdir: str
    line: int

    @property
    def shown(self) -> str:
        return self.command if isinstance(self.command, str) else shlex.join(self.command)


@dataclass(frozen=True)
class ImageRecipe:
    base: str
    steps: tuple[Copy | Run, ...]
    # The writable folders a sandbox of this image mounts: each starts with what the build left there.
    seed: tuple[str, ...] = ()
    timeout: float = 600
    digest: str = field(init=False)

    def __post_init__(self):
        content = hashlib.sha256(json.dumps([self.base, list(self.seed)]).encode())
        for step in self.steps:
            if isinstance(step, Copy):
                for path, data in step.files:
                    content.update(f"\0copy\0{path}\0{len(data)}\0".encode() + data)
            else:
                content.update(f"\0run\0{json.dumps([step.command, step.env, step.workdir])}".encode())
        object.__setattr__(self, "digest", content.hexdigest())

    def tag_on(self, base_id: str) -> str:
        """The built image's tag on an engine whose `base` has this id."""
        return f"{BUILT_REPOSITORY}:{hashlib.sha256(f'{self.digest}:{base_id}'.encode()).hexdigest()[:24]}"


def tag_for(backend: Backend, recipe: ImageRecipe) -> str:
    """The recipe's tag on this backend's engine; ImageMissing without its base."""
    return recipe.tag_on(_base_id(backend, recipe))


def _base_id(backend: Backend, recipe: ImageRecipe) -> str:
    base_id = backend.image_id(recipe.base)
    if base_id is None:
        raise ImageMissing(f"The base image {recipe.base!r} is missing on this host; run `python manage.py build_sandbox_image`.")
    return base_id


def ensure(backend: Backend, recipe: ImageRecipe) -> tuple[str, bool]:
    """The recipe's image on the backend's engine, built unless there already: its tag, and whether it was built now.

    ImageBuildFailed (the recipe's fault) naming the step; a platform error where the engine cannot build."""
    base_id = _base_id(backend, recipe)
    tag = recipe.tag_on(base_id)
    if backend.image_id(tag) is not None:
        return tag, False
    if Capability.BUILD not in backend.capabilities:
        raise LaunchFailed(f"This host's {backend.name} backend builds no images, and {tag} (a task's RUN lines) is not on it.")
    if BUILD_RUNTIME not in backend.runtimes():
        raise LaunchFailed(
            f"This host's engine has no {BUILD_RUNTIME} runtime (gVisor holding a build's files in memory), so RUN lines cannot be built "
            "on it; scripts/ensure_docker.sh registers it."
        )
    deadline = time.monotonic() + recipe.timeout + LIFETIME_MARGIN + 30
    while True:
        try:
            _build(backend, recipe, tag, base_id)
            _prune_quietly(backend, keep=tag)
            return tag, True
        except BuildInProgress:
            # Another worker builds it: its image is ours once tagged. Its sandbox stops at its own
            # deadline, so a dead builder is waited for no longer than its build could have run.
            if time.monotonic() > deadline:
                raise LaunchFailed(f"Waited {recipe.timeout + LIFETIME_MARGIN + 30:g} s for another build of {tag} on this engine; retry.") from None
            time.sleep(WAIT_SECONDS)
            if backend.image_id(tag) is not None:
                return tag, False


def _build(backend: Backend, recipe: ImageRecipe, tag: str, base_id: str):
    started = time.monotonic()
    spec = SandboxSpec(
        owner=Owner(OWNER_KIND, tag.rpartition(":")[2]),
        # By id, as the layer's FROM: a sandbox image rebuilt meanwhile is another base, and another tag.
        image=base_id,
        limits=Limits.defaults(memory_mb=settings.SANDBOX_BUILD_MEMORY_MB),
        network="none",
        runtime=BUILD_RUNTIME,
        workdir="/",
        user="root",
        build_seconds=recipe.timeout + LIFETIME_MARGIN,
    )

    def left() -> float:
        return max(recipe.timeout - (time.monotonic() - started), 1)

    with backend.sandbox(spec) as box:
        box.exec(["touch", MARKER], timeout=30)
        for step in recipe.steps:
            if isinstance(step, Copy):
                # Docker's COPY keeps a file's mode, which an archive of task files does not carry: a copied script
                # a later RUN executes must be executable.
                box.put_files("/", {path.lstrip("/"): data for path, data in step.files}, mode=0o755)
                continue
            argv = list(step.command) if isinstance(step.command, tuple) else ["sh", "-c", step.command]
            # WORKDIR makes its folder, as Docker's does, before the step runs in it.
            in_workdir = ["sh", "-c", 'mkdir -p "$1" && cd "$1" && shift && exec "$@"', "sh", step.workdir, *argv]
            with _the_builds_fault(f"at line {step.line} (RUN {_short(step.shown)})", recipe):
                ran = box.exec(in_workdir, timeout=left(), env=dict(step.env), workdir="/", tail_bytes=2000)
            if ran.exit_code != 0:
                raise ImageBuildFailed(f"RUN at line {step.line} exited with code {ran.exit_code}: {ran.output[-600:]}", output=ran.output)
        with _the_builds_fault("while its files were packed", recipe):
            packed = box.exec(_layer_command(recipe.seed), timeout=left(), tail_bytes=2000)
            if packed.exit_code == TOO_BIG:
                raise ImageBuildFailed(
                    f"After the build, {packed.output.strip()[-200:]}; a sandbox's writable folder holds at most {Limits.defaults().tmp_mb} MB."
                )
            if packed.exit_code != 0:
                raise ImageBuildFailed(f"The build's files could not be packed (exit code {packed.exit_code}): {packed.output[-600:]}", output=packed.output)
            size = int(packed.output.split()[-1])
            most = settings.SANDBOX_BUILD_LAYER_MAX_MB
            if size > most * 2**20:
                raise ImageBuildFailed(
                    f"The build wrote {size / 2**20:.0f} MB; an image built here holds at most {most} MB of its own (BELVEDIR_SANDBOX_BUILD_LAYER_MAX_MB)."
                )
            layer = box.read_file(LAYER, size)
        if len(layer) != size:
            # The engine's stream of the file ended early: ours, not the build's.
            raise SandboxPlatformError(f"Only {len(layer)} of the build's {size} bytes came back from the engine; retry.")
        _check_layer(layer)
        # Tagged while the build sandbox still holds its name: another builder waiting on the name finds the image.
        labels = {LABEL_SEED: json.dumps(list(recipe.seed)), LABEL_RECIPE: recipe.digest, LABEL_LAYER_BYTES: str(len(layer))}
        backend.image_from_layer(base_id, layer, tag, labels)
    logger.info("built %s in %.1f s (%d bytes of layer)", tag, time.monotonic() - started, len(layer))


def prune(backend: Backend, keep: str, *, repository: str = BUILT_REPOSITORY, grace: float = PRUNE_GRACE_SECONDS) -> list[str]:
    """Built images past BELVEDIR_SANDBOX_BUILT_IMAGES_MAX_MB on the backend's engine removed, oldest first; the tags
    removed. Kept: `keep` (the one just built), any younger than `grace` seconds, and any a container holds.

    Each distinct recipe is one build, charged as its trial: without a bound, a user paying for trials of ever new
    RUN lines would fill a host's disk. A pruned image is built again when a task wants it. An old image removed
    between a trial finding it and starting from it fails that trial as the platform's fault (refunded, retried)."""
    most = settings.SANDBOX_BUILT_IMAGES_MAX_MB * 2**20
    found = sorted(backend.images(repository), key=lambda image: image.created)
    total = sum(_own_bytes(image) for image in found)
    young = time.time() - grace
    removed = []
    for image in found:
        if total <= most:
            break
        if image.tag != keep and image.created < young and backend.remove_image(image.tag):
            total -= _own_bytes(image)
            removed.append(image.tag)
    if removed:
        logger.info("pruned %d built images past %d MB: %s", len(removed), settings.SANDBOX_BUILT_IMAGES_MAX_MB, ", ".join(removed))
    return removed


def _own_bytes(image) -> int:
    # One built before its size was labelled counts whole: pruned sooner rather than never.
    return int(image.labels.get(LABEL_LAYER_BYTES) or image.size)


def _prune_quietly(backend: Backend, keep: str):
    """After a build: an engine that cannot prune now fails no trial (the next build tries again)."""
    try:
        prune(backend, keep)
    except SandboxPlatformError:
        logger.warning("built images on %s could not be pruned", backend.name, exc_info=True)


@contextmanager
def _the_builds_fault(where: str, recipe: ImageRecipe):
    """A build's sandbox timing out, running out of memory or dying is the recipe's doing: said as a build's failure."""
    try:
        yield
    except SandboxTimeout as exc:
        raise ImageBuildFailed(f"The build ran past its time limit of {recipe.timeout:g} s {where}.", output=exc.output) from exc
    except SandboxOutOfMemory as exc:
        raise ImageBuildFailed(
            f"The build ran out of its {settings.SANDBOX_BUILD_MEMORY_MB} MB, which hold every file it writes, {where}.", output=exc.output
        ) from exc
    except SandboxUserError as exc:
        if isinstance(exc, ImageBuildFailed):
            raise
        raise ImageBuildFailed(f"The build's sandbox stopped {where}: {exc.message}", output=exc.output) from exc


# What Docker's ADD would take for a compressed archive (gzip, bzip2, xz, zstd) and inflate onto the host's disk.
COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")


def _check_layer(layer: bytes):
    """The layer was packed by the build's own tools, which its steps could replace: the engine unpacks it as root on
    the host, so only a plain tar of files, folders and links inside the image goes to it."""
    if layer.startswith(COMPRESSED):
        raise ImageBuildFailed("The build's files came back compressed: only a plain tar is laid on an image.")
    try:
        with tarfile.open(fileobj=io.BytesIO(layer), mode="r:") as archive:
            for member in archive:
                if not (member.isreg() or member.isdir() or member.issym() or member.islnk()) or member.issparse():
                    raise ImageBuildFailed(f"The build made {member.name}, neither a file, a folder nor a link: an image holds no other kind.")
                # (A symbolic link may point anywhere: it is read inside the image. A hard link names a member.)
                named = [member.name, *([member.linkname] if member.islnk() else [])]
                if any(n.startswith("/") or ".." in n.split("/") for n in named):
                    raise ImageBuildFailed(f"The build's files name {' -> '.join(named)}, outside the image.")
    except tarfile.TarError as exc:
        raise ImageBuildFailed(f"The build's files could not be read back as a plain tar: {exc}") from None


def _layer_command(seed: tuple[str, ...]) -> str:
    """Everything the steps wrote, as one tar at LAYER; each seeded folder's content kept under SEED_DIR instead (an
    empty one where the build made none: a WORKDIR no step wrote to)."""
    keep = " ".join(
        f"&& mkdir -p {shlex.quote(SEED_DIR + f)} && {{ [ ! -d {shlex.quote(f)} ] || cp -a {shlex.quote(f)}/. {shlex.quote(SEED_DIR + f)}/; }}" for f in seed
    )
    pruned = " -o ".join(f"-path {shlex.quote(p)}" for p in ("/proc", "/sys", "/dev", MARKER, LAYER, *seed))
    # A seeded folder is copied into a tmpfs of Limits.tmp_mb when a sandbox starts: one that cannot fit fails here.
    # (Python, not du or stat: gVisor's statx fails here, and python3 is in every base this platform builds on.)
    sizes = (
        "import os, sys\n"
        "for top in sys.argv[2:]:\n"
        "    size = sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(top) for f in files)\n"
        "    if size > int(sys.argv[1]) * 2**20:\n"
        f"        print(f'{{top}} holds {{size / 2**20:.0f}} MB'); sys.exit({TOO_BIG})\n"
    )
    check = f"python3 -c {shlex.quote(sizes)} {Limits.defaults().tmp_mb} {' '.join(shlex.quote(f) for f in seed)}" if seed else "true"
    # One stream, in the order things were written: the layer's size is read as the output's last word, and tar's
    # warnings on a stream of their own could come after it (seen in CI: "Removing leading `/' from hard link
    # targets" last, read as the size). The engine copies an exec's stdout and stderr each on its own.
    return (
        f"exec 2>&1; set -e; {check}; mkdir -p {SEED_DIR} {keep}; chmod -R a+rX {SEED_DIR};"
        f" find / -xdev \\( {pruned} \\) -prune -o -cnewer {MARKER} -print0 | tar --null --no-recursion -cf {LAYER} -T -;"
        f" python3 -c {shlex.quote(f'import os; print(os.path.getsize({LAYER!r}))')}"
    )


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."
