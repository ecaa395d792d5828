"""A task's environment, resolved without a build: the offline stand-in for `docker build environment/`.

Sandbox hosts reach no registry, so a `FROM` a public image could never be pulled, and a `RUN` would need
a build (and a network) we do not have. What is accepted instead is the Dockerfile of a task that only
adds files to the platform's own image:

- `FROM` naming settings.SANDBOX_IMAGE (the Debian bookworm image every sandbox runs), once;
- `WORKDIR <absolute path>`;
- `ENV <name>=<value> ...` or `ENV <name> <value>`;
- `COPY <src>... <dst>`, each src a file or folder inside environment/;
- comments, blank lines and `\\` continuations.

Anything else (RUN, ADD, USER, ARG, a `COPY --from`...) is refused, naming the line and the instruction, and
so is a FROM of any other image, naming the one that is available. The result is the image, the working
folder, the environment and the files to put ({absolute path in the sandbox: bytes}).
"""

import posixpath
import shlex
from dataclasses import dataclass, field

from django.conf import settings

from belvedir.sandbox.spec import HOME

from .harbor_format import TaskFormatError

DOCKERFILE = "environment/Dockerfile"
MAX_DOCKERFILE_BYTES = 64 * 1024
# A sandbox's root is read-only: each top-level folder a task writes to becomes an empty writable one, which
# would hide the image's own (/usr holds Python). HOME and /tmp are writable already. The trial's own folders
# (/tests, /solution, /logs) are not the environment's to fill.
SYSTEM_FOLDERS = frozenset("/bin /boot /dev /etc /lib /lib32 /lib64 /libx32 /opt /proc /root /run /sbin /srv /sys /usr /var".split())
TRIAL_FOLDERS = frozenset({"/tests", "/solution", "/logs"})


@dataclass
class Environment:
    image: str
    # Docker's default is /, read-only in a sandbox: a task without WORKDIR works in the sandbox user's home.
    workdir: str = HOME
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def folders(self) -> tuple[str, ...]:
        """The top-level folders the files and the working folder live in: each one writable in the sandbox."""
        tops = {"/" + path.lstrip("/").split("/", 1)[0] for path in [*self.files, self.workdir]}
        return tuple(sorted(tops - {"/", "/home", "/tmp"}))


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
    environment: Environment | None = None
    for number, line in _instructions(text):
        instruction, _, rest = line.partition(" ")
        instruction, rest = instruction.upper(), rest.strip()
        if environment is None:
            if instruction != "FROM":
                raise EnvironmentRefused(f"{instruction} before FROM: a Dockerfile starts with FROM", number)
            environment = Environment(image=_base_image(rest, number))
            continue
        if instruction == "WORKDIR":
            environment.workdir = _absolute(rest, environment.workdir, number)
        elif instruction == "ENV":
            environment.env.update(_env(rest, number))
        elif instruction == "COPY":
            _copy(rest, context, environment, number)
        elif instruction == "FROM":
            raise EnvironmentRefused("a second FROM: multi-stage builds need a build, which is not available here", number)
        else:
            raise EnvironmentRefused(
                f"{instruction} is not supported: without a build only FROM {settings.SANDBOX_IMAGE}, WORKDIR, ENV and COPY can be run here", number
            )
    if environment is None:
        raise EnvironmentRefused("has no FROM")
    return environment


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


def _base_image(rest: str, number: int) -> str:
    words = rest.split()
    if not words or words[0].startswith("--"):
        raise EnvironmentRefused(f"FROM {rest!r}: name one image, with no options", number)
    image = words[0]
    if len(words) > 1:
        raise EnvironmentRefused("FROM ... AS: multi-stage builds need a build, which is not available here", number)
    available = settings.SANDBOX_IMAGE
    if image != available:
        raise EnvironmentRefused(
            f"FROM {image} cannot be pulled here: only {available} is available; base the task on it (Debian bookworm with Python 3 and git) or ask for the image to be added",
            number,
        )
    return image


def _absolute(path: str, workdir: str, number: int) -> str:
    if not path or any(c in path for c in "$\n\x00"):
        raise EnvironmentRefused(f"WORKDIR {path!r}: a plain path is needed (no variables)", number)
    resolved = posixpath.normpath(posixpath.join(workdir, path))
    top = "/" + resolved.strip("/").split("/", 1)[0]
    if resolved.startswith("//") or top == "/":
        raise EnvironmentRefused(f"{path!r}: the root itself is read-only in a sandbox; name a folder such as /app", number)
    if top in SYSTEM_FOLDERS:
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


def _copy(rest: str, context: dict[str, bytes], environment: Environment, number: int):
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise EnvironmentRefused(f"COPY: {exc}", number) from None
    if any(word.startswith("--") for word in words):
        raise EnvironmentRefused(f"COPY {rest}: options (--from, --chown, --chmod...) are not supported", number)
    if len(words) < 2:
        raise EnvironmentRefused(f"COPY {rest!r}: name a source and a destination", number)
    *sources, dst = words
    target = _absolute(dst, environment.workdir, number) if dst not in (".", "./") else environment.workdir
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
            environment.files[posixpath.join(target, posixpath.basename(src)) if into_folder else target] = context[src]
            continue
        else:
            prefix = src + "/"
            found = {path: data for path, data in context.items() if path.startswith(prefix)}
        if not found:
            raise EnvironmentRefused(f"COPY {source}: no such file or folder in environment/", number)
        for path, data in found.items():
            environment.files[posixpath.join(target, path[len(prefix) :])] = data
