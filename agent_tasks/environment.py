"""A task's environment: the offline stand-in for `docker build environment/`.

Sandbox hosts reach no registry, so a `FROM` a public image can never be pulled: it is resolved to the
platform's own image where that is the same distribution and Python (Debian 12 "bookworm", Python 3.11), and
the resolution is said (`Environment.resolution`); any other image is refused, naming what resolves. Accepted:

- `FROM` once: settings.SANDBOX_IMAGE, or a public image it stands in for (RESOLVED);
- `WORKDIR <path>`, `ENV <name>=<value> ...` (or `ENV <name> <value>`), `ARG <name>[=<value>]` (for RUN only);
- `COPY <src>... <dst>`, each src a file or folder inside environment/;
- `RUN <command>` or `RUN ["argv", ...]`, run as root at build time with no network (nothing can be downloaded);
- comments, blank lines and `\\` continuations.

Anything else (ADD, USER, a `COPY --from`, `RUN --mount`...) is refused, naming the line and the instruction.

A Dockerfile without RUN needs no build: the trial puts its COPY files into the sandbox of the base image
(`Environment.files`). One with RUN becomes an image recipe (`Environment.recipe`): the sandbox's door builds it
once per engine, tagged by the hash of the build context (belvedir/sandbox/images.py).
"""

import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field

from django.conf import settings

from belvedir.sandbox.images import Copy, ImageRecipe, Run
from belvedir.sandbox.spec import HOME

from .harbor_format import DEFAULT_BUILD_TIMEOUT_SEC, TaskFormatError

DOCKERFILE = "environment/Dockerfile"
MAX_DOCKERFILE_BYTES = 64 * 1024
# A sandbox's root is read-only: each top-level folder a task writes to becomes an empty writable one, which
# would hide the image's own (/usr holds Python). HOME and /tmp are writable already. The trial's own folders
# (/tests, /solution, /logs) are not the environment's to fill.
SYSTEM_FOLDERS = frozenset("/bin /boot /dev /etc /lib /lib32 /lib64 /libx32 /opt /proc /root /run /sbin /srv /sys /usr /var".split())
TRIAL_FOLDERS = frozenset({"/tests", "/solution", "/logs"})
# Public images the platform's own stands in for: Debian 12 and Python 3.11, as settings.SANDBOX_IMAGE is. Docker's
# python:3.11 images moved to Debian 13 in 2025: the same Python on an older Debian, which the resolution says.
RESOLVED = {
    re.compile(r"debian:(bookworm|12)(\.\d+)*(-slim)?(-\d+)?"): "Debian 12 (bookworm), as the image named",
    re.compile(r"python:3\.11(\.\d+)?(-slim)?(-bookworm)?"): "Python 3.11 on Debian 12 (bookworm), Debian's own (`python` is python3)",
    re.compile(r"python:3\.11(\.\d+)?(-slim)?-trixie"): "Python 3.11 as the image named (`python` is python3), on Debian 12 (bookworm) rather than 13",
    re.compile(r"buildpack-deps:(bookworm|12)(-curl|-scm)?"): "Debian 12 (bookworm) with git and Python 3.11, without the compilers",
}
RESOLVES = "debian:bookworm[-slim], debian:12[-slim], python:3.11[-slim][-bookworm|-trixie], buildpack-deps:bookworm"
# Where COPY lands in the home or /tmp, a sandbox mounts an empty folder over the image: such files are put at start.
MOUNTED = ("/home/", "/tmp/")


@dataclass
class Environment:
    image: str
    # What the Dockerfile's FROM named, and how it came to `image` ("" when it named the platform's own).
    named: str = ""
    resolution: str = ""
    # Docker's default is /, read-only in a sandbox: a task without WORKDIR works in the sandbox user's home.
    workdir: str = HOME
    env: dict[str, str] = field(default_factory=dict)
    # Put into the sandbox at its start: every COPY without a build, only those into mounted folders with one.
    files: dict[str, bytes] = field(default_factory=dict)
    # With RUN lines: the build's steps in order (COPY and RUN), else empty.
    steps: list[Copy | Run] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)

    @property
    def folders(self) -> tuple[str, ...]:
        """The top-level folders the copied files and the working folder live in: each one writable in the sandbox
        (those of the image's own, /usr and the like, stay its read-only content)."""
        tops = {"/" + path.lstrip("/").split("/", 1)[0] for path in [*self.copied, self.workdir]}
        return tuple(sorted(tops - {"/", "/home", "/tmp"} - SYSTEM_FOLDERS))

    @property
    def builds(self) -> bool:
        return any(isinstance(step, Run) for step in self.steps)

    def recipe(self, timeout: float) -> ImageRecipe | None:
        """The image to build (None without RUN lines), held to settings.SANDBOX_BUILD_MAX_SECONDS."""
        if not self.builds:
            return None
        return ImageRecipe(base=self.image, steps=tuple(self.steps), seed=self.folders, timeout=min(timeout, settings.SANDBOX_BUILD_MAX_SECONDS))


class EnvironmentRefused(TaskFormatError):
    """A Dockerfile this platform cannot build offline: the message says which line and why."""

    def __init__(self, reason: str, line: int | None = None):
        super().__init__(DOCKERFILE, reason, key=f"line {line}" if line else None)


def resolve(files: dict[str, bytes]) -> Environment:
    """The environment of a task given its `environment/` files (as AgentTask.files("environment") returns them)."""
    raw = files.get(DOCKERFILE)
    if raw is None:
        raise EnvironmentRefused("is missing: only a Dockerfile environment can be run here (no compose file, no prebuilt image)")
    if len(raw) > MAX_DOCKERFILE_BYTES:
        raise EnvironmentRefused(f"is {len(raw):,} bytes; the limit is {MAX_DOCKERFILE_BYTES:,}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise EnvironmentRefused("is not UTF-8 text") from None
    context = {path[len("environment/") :]: data for path, data in files.items() if path.startswith("environment/")}
    instructions = [(number, *_split(line)) for number, line in _instructions(text)]
    building = any(instruction == "RUN" for _, instruction, _ in instructions)
    environment: Environment | None = None
    args: dict[str, str] = {}
    for number, instruction, rest in instructions:
        if environment is None:
            if instruction != "FROM":
                raise EnvironmentRefused(f"{instruction} before FROM: a Dockerfile starts with FROM", number)
            environment = _base_image(rest, number)
            continue
        if instruction == "WORKDIR":
            environment.workdir = _absolute(rest, environment.workdir, number)
        elif instruction == "ENV":
            environment.env.update(_env(rest, number))
        elif instruction == "ARG":
            name, _, default = rest.partition("=")
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise EnvironmentRefused(f"ARG {rest!r}: write NAME or NAME=value", number)
            args[name] = default.strip('"')
        elif instruction == "COPY":
            _copy(rest, context, environment, number, building)
        elif instruction == "RUN":
            environment.steps.append(Run(_command(rest, number), tuple({**args, **environment.env}.items()), environment.workdir, number))
        elif instruction == "FROM":
            raise EnvironmentRefused("a second FROM: multi-stage builds are not supported here", number)
        else:
            raise EnvironmentRefused(f"{instruction} is not supported: FROM, WORKDIR, ENV, ARG, COPY and RUN can be built here", number)
    if environment is None:
        raise EnvironmentRefused("has no FROM")
    return environment


def summary(files: dict[str, bytes]) -> dict:
    """What the task pages and the API say of a task's environment: the image its FROM named, the platform's that
    stands in, how many steps a build runs (0: none, its files go in at the start), or why it cannot be built."""
    try:
        env = resolve(files)
    except EnvironmentRefused as exc:
        return {"refused": str(exc)}
    recipe = env.recipe(DEFAULT_BUILD_TIMEOUT_SEC)
    return {
        "from": env.named or env.image,
        "image": env.image,
        "resolution": env.resolution,
        "build_steps": len(recipe.steps) if recipe else 0,
        "build_digest": recipe.digest[:24] if recipe else "",
        "workdir": env.workdir,
    }


def _split(line: str) -> tuple[str, str]:
    instruction, _, rest = line.partition(" ")
    return instruction.upper(), rest.strip()


def _instructions(text: str):
    """(first line number, instruction) pairs, continuations joined and comments dropped."""
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        yield start, (pending + stripped).strip()
        pending = ""
    if pending.strip():
        yield start, pending.strip()


def _base_image(rest: str, number: int) -> Environment:
    words = rest.split()
    if not words or words[0].startswith("--"):
        raise EnvironmentRefused(f"FROM {rest!r}: name one image, with no options", number)
    if len(words) > 1:
        raise EnvironmentRefused("FROM ... AS: multi-stage builds are not supported here", number)
    named = words[0]
    available = settings.SANDBOX_IMAGE
    if named == available:
        return Environment(image=available)
    # A registry's own name and a pinned digest say where and which build to pull: neither changes what stands in.
    plain = re.sub(r"^(docker\.io/)?(library/)?", "", named.split("@", 1)[0])
    for pattern, what in RESOLVED.items():
        if pattern.fullmatch(plain):
            return Environment(image=available, named=named, resolution=f"FROM {named} is built on {available}: {what}.")
    raise EnvironmentRefused(
        f"FROM {named} cannot be pulled here and nothing stands in for it: the platform's image {available} is Debian 12 with "
        f"Python 3.11, and resolves {RESOLVES}. Base the task on one of those, or ask for the image to be added",
        number,
    )


def _command(rest: str, number: int) -> str | tuple[str, ...]:
    if rest.startswith("--"):
        raise EnvironmentRefused(f"RUN {rest[:60]}: options (--mount, --network...) are not supported", number)
    if "<<" in rest.split("#", 1)[0] and re.search(r"<<-?\s*['\"]?[A-Za-z_]+['\"]?\s*$", rest):
        raise EnvironmentRefused("RUN with a heredoc is not supported: write the script as a file and COPY it", number)
    if rest.startswith("["):
        try:
            argv = json.loads(rest)
        except ValueError:
            argv = None
        if not isinstance(argv, list) or not argv or not all(isinstance(word, str) for word in argv):
            raise EnvironmentRefused(f"RUN {rest[:60]}: the exec form is a JSON list of strings", number)
        return tuple(argv)
    if not rest:
        raise EnvironmentRefused("RUN names no command", number)
    return rest


def _absolute(path: str, workdir: str, number: int, *, image_folders: bool = False) -> str:
    """`path` made absolute; refused where a sandbox cannot write it (a built image may hold files in the image's
    own folders, `image_folders`: they stay read-only)."""
    if not path or any(c in path for c in "$\n\x00"):
        raise EnvironmentRefused(f"WORKDIR {path!r}: a plain path is needed (no variables)", number)
    resolved = posixpath.normpath(posixpath.join(workdir, path))
    top = "/" + resolved.strip("/").split("/", 1)[0]
    if resolved.startswith("//") or top == "/":
        raise EnvironmentRefused(f"{path!r}: the root itself is read-only in a sandbox; name a folder such as /app", number)
    if top in SYSTEM_FOLDERS and not image_folders:
        raise EnvironmentRefused(f"{path!r}: {top} is the image's own and read-only in a sandbox; use a folder of the task's own such as /app", number)
    if top in TRIAL_FOLDERS:
        raise EnvironmentRefused(f"{path!r}: {top} is where a trial puts the verifier, the solution and their logs", number)
    return resolved


def _env(rest: str, number: int) -> dict[str, str]:
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise EnvironmentRefused(f"ENV: {exc}", number) from None
    if words and "=" not in words[0]:
        # The legacy form: ENV NAME value with spaces
        name, _, value = rest.partition(" ")
        return {name: value.strip()}
    if not words or not all("=" in word and word.split("=", 1)[0] for word in words):
        raise EnvironmentRefused(f"ENV {rest!r}: write NAME=value pairs", number)
    return dict(word.split("=", 1) for word in words)


def _copy(rest: str, context: dict[str, bytes], environment: Environment, number: int, building: bool):
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise EnvironmentRefused(f"COPY: {exc}", number) from None
    if any(word.startswith("--") for word in words):
        raise EnvironmentRefused(f"COPY {rest}: options (--from, --chown, --chmod...) are not supported", number)
    if len(words) < 2:
        raise EnvironmentRefused(f"COPY {rest!r}: name a source and a destination", number)
    *sources, dst = words
    target = _absolute(dst, environment.workdir, number, image_folders=building) if dst not in (".", "./") else environment.workdir
    copied: dict[str, bytes] = {}
    for source in sources:
        src = posixpath.normpath(source).lstrip("/")
        if src.startswith("..") or any(c in src for c in "*?[$"):
            raise EnvironmentRefused(f"COPY {source}: a source must be a plain path inside environment/", number)
        if src in ("", "."):
            found = {path: data for path, data in context.items() if path != "Dockerfile"}
            prefix = ""
        elif src in context:
            # A file: into the destination folder when it ends in / (or several sources), else as that name.
            into_folder = dst.endswith("/") or len(sources) > 1
            copied[posixpath.join(target, posixpath.basename(src)) if into_folder else target] = context[src]
            continue
        else:
            prefix = src + "/"
            found = {path: data for path, data in context.items() if path.startswith(prefix)}
        if not found:
            raise EnvironmentRefused(f"COPY {source}: no such file or folder in environment/", number)
        for path, data in found.items():
            copied[posixpath.join(target, path[len(prefix) :])] = data
    environment.copied += copied
    if building:
        # In order with the RUN lines, which may use them; those under a mounted folder also go in at the start.
        environment.steps.append(Copy(tuple(copied.items())))
        copied = {path: data for path, data in copied.items() if path.startswith(MOUNTED)}
    environment.files.update(copied)
