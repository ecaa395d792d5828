"""Harbor's task format, read natively: one task directory given as {relative path: bytes}.

The schema follows Harbor's documentation of task.toml (harborframework.com/docs/tasks and its TaskConfig reference):
top-level `version` (or the newer `schema_version`) and `source`, a `[task]` table, a free-form `[metadata]`, and the
`[verifier]`, `[agent]`, `[environment]` and `[solution]` tables. The `harbor` package itself needs Python 3.12, so
the keys are checked here, one checker per key. Harbor ignores keys it does not know; we keep them in the stored
config and list them, so a task written for a newer Harbor imports and says what we did not read.
"""

import datetime
import hashlib
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field

from belvedir.core import jsonvalues

# Harbor's documented defaults when a task leaves them out.
DEFAULT_AGENT_TIMEOUT_SEC = 600.0
DEFAULT_VERIFIER_TIMEOUT_SEC = 600.0
DEFAULT_BUILD_TIMEOUT_SEC = 600.0

# A task.toml is a page of settings; a bigger one is a mistake or an attack on the TOML parser.
MAX_TASK_TOML_BYTES = 64 * 1024
# Harbor's own tables are two deep ([environment.tpu]); a task's metadata may nest further, not without end.
MAX_DEPTH = 16
MAX_INSTRUCTION_BYTES = 1024 * 1024
# A day: past it a limit is a typo, and a trial would hold a sandbox that long.
MAX_TIMEOUT_SEC = 24 * 3600

TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
# Resource sizes in Harbor's deprecated `memory` / `storage` spelling: "2G", "512M".
SIZE = re.compile(r"\d+(\.\d+)?\s*[KMGT]i?B?", re.IGNORECASE)


class TaskFormatError(ValueError):
    """A task that breaks the format: the message names the file, the key (where there is one) and the reason."""

    status_code = 400

    def __init__(self, file: str, reason: str, key: str | None = None):
        self.file, self.key, self.reason = file, key, reason
        super().__init__(f"{file}: {key}: {reason}" if key else f"{file}: {reason}")

    def within(self, task: str) -> "TaskFormatError":
        """The same error with the file named from the task set's root ("hello/task.toml")."""
        return TaskFormatError(f"{task}/{self.file}", self.reason, self.key)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def positive_number(value):
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT_SEC:
        return f"must be a positive number of seconds up to {MAX_TIMEOUT_SEC}, got {_shown(value)}"


# A count of CPUs, megabytes or GPUs past this is a typo (or an attack on whatever reads it), never a machine.
MAX_COUNT = 2**31 - 1


def positive_int(value):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        return f"must be a positive whole number up to {MAX_COUNT}, got {_shown(value)}"


def count(value):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        return f"must be a whole number from 0 to {MAX_COUNT}, got {_shown(value)}"


def string(value):
    if not isinstance(value, str):
        return f"must be a string, got {_shown(value)}"


def boolean(value):
    if not isinstance(value, bool):
        return f"must be true or false, got {_shown(value)}"


def strings(value):
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f"must be a list of strings, got {_shown(value)}"


def size(value):
    if not isinstance(value, str) or not SIZE.fullmatch(value.strip()):
        return f'must be a size such as "2G" or "512M", got {_shown(value)}'


def verifier_mode(value):
    if value not in ("in_place", "sealed"):
        return f'must be "in_place" or "sealed", got {_shown(value)}'


def string_table(value):
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return f"must be a table of strings, got {_shown(value)}"


def authors(value):
    ok = isinstance(value, list) and all(isinstance(a, dict) and all(isinstance(v, str) for v in a.values()) for a in value)
    if not ok:
        return f'must be a list of tables such as {{ name = "...", email = "..." }}, got {_shown(value)}'


def tables(value):
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        return f"must be a list of tables, got {_shown(value)}"


# Every key Harbor documents, by its dotted path, with what its value must be.
KEYS: dict[str, Callable] = {
    "version": string,
    "schema_version": string,
    "source": string,
    "task.name": string,
    "task.description": string,
    "task.authors": authors,
    "task.keywords": strings,
    "verifier.timeout_sec": positive_number,
    "verifier.env": string_table,
    "verifier.user": string,
    # Belvedir's own (agent_tasks/outputs.py): what a sealed verifier or a regrade grades, and how the verifier runs.
    "verifier.outputs": strings,
    "verifier.mode": verifier_mode,
    "agent.timeout_sec": positive_number,
    "agent.user": string,
    "environment.build_timeout_sec": positive_number,
    "environment.docker_image": string,
    "environment.cpus": positive_int,
    "environment.memory_mb": positive_int,
    "environment.storage_mb": positive_int,
    "environment.gpus": count,
    "environment.gpu_types": strings,
    "environment.allow_internet": boolean,
    "environment.memory": size,  # deprecated in Harbor for memory_mb, still read
    "environment.storage": size,  # deprecated for storage_mb
    "environment.mcp_servers": tables,
    "environment.skills_dir": string,
    "environment.tpu.type": string,
    "environment.tpu.topology": string,
    "solution.env": string_table,
}
# Tables whose keys are the task author's own: nothing in them is unknown.
FREE_FORM = {"metadata"}
TABLES = {"task", "verifier", "agent", "environment", "environment.tpu", "solution"}


@dataclass
class ParsedTask:
    name: str
    files: dict[str, bytes]
    config: dict
    unknown_keys: list[str]
    instruction: str
    agent_timeout_sec: float
    verifier_timeout_sec: float
    has_solution: bool
    digest: str = field(default="")


def parse_task_toml(data: bytes) -> tuple[dict, list[str]]:
    """task.toml's settings and the dotted keys the schema does not know, or TaskFormatError."""
    if len(data) > MAX_TASK_TOML_BYTES:
        raise TaskFormatError("task.toml", f"is {len(data):,} bytes; the limit is {MAX_TASK_TOML_BYTES:,}")
    try:
        config = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise TaskFormatError("task.toml", "is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskFormatError("task.toml", f"is not valid TOML: {exc}") from None
    except RecursionError:
        # tomllib recurses per nested array or inline table: 64 KB of "[[[[" is enough to exhaust the stack.
        raise TaskFormatError("task.toml", "nests arrays or tables too deeply") from None
    # Dotted keys (a.b.c...) nest tables without recursing in the parser: the depth is checked before anything walks
    # it recursively, then the stored JSON is held to what every JSON value a user writes is (belvedir/core/jsonvalues).
    if _depth(config) > MAX_DEPTH:
        raise TaskFormatError("task.toml", f"nests tables or arrays deeper than {MAX_DEPTH} levels")
    unknown: list[str] = []
    _check_table(config, "", unknown)
    stored = _as_json(config)
    try:
        jsonvalues.check(stored, "task.toml", max_depth=MAX_DEPTH, max_size=None)
    except jsonvalues.JsonValueError as exc:
        raise TaskFormatError("task.toml", exc.message.removeprefix("task.toml").lstrip(": .") or exc.message) from None
    return stored, unknown


def _depth(value) -> int:
    """How deep tables and arrays nest, walked without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest


def _as_json(value):
    """TOML's dates and times as ISO text, and inf/nan as text: the config is stored as JSON, which has neither."""
    if isinstance(value, dict):
        return {_as_json(k): _as_json(v) for k, v in value.items()}
    if isinstance(value, str) and "\x00" in value:
        # TOML allows "\u0000"; PostgreSQL's JSON does not.
        raise TaskFormatError("task.toml", "holds a NUL character")
    if isinstance(value, list):
        return [_as_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return value


def _check_table(table: dict, prefix: str, unknown: list[str]) -> None:
    for key, value in table.items():
        path = f"{prefix}{key}"
        if path in KEYS:
            if reason := KEYS[path](value):
                raise TaskFormatError("task.toml", reason, key=_key_name(path))
        elif path in TABLES or path in FREE_FORM:
            if not isinstance(value, dict):
                raise TaskFormatError("task.toml", f"must be a table, got {_shown(value)}", key=f"[{path}]")
            if path in TABLES:
                _check_table(value, f"{path}.", unknown)
        else:
            unknown.append(path)


def _key_name(path: str) -> str:
    """`agent.timeout_sec` as a reader of the file sees it: `[agent] timeout_sec`."""
    table, _, key = path.rpartition(".")
    return f"[{table}] {key}" if table else key


def has_environment(files: dict[str, bytes], config: dict) -> bool:
    return "environment/Dockerfile" in files or any(f"environment/{c}" in files for c in COMPOSE_FILES) or "docker_image" in config.get("environment", {})


def parse_task(name: str, files: dict[str, bytes]) -> ParsedTask:
    """One task directory's files, checked; TaskFormatError names the file, the key and the reason."""
    if not TASK_NAME.fullmatch(name):
        raise TaskFormatError(name or "(the folder)", "a task's directory name must be letters, digits, '.', '_' or '-' (up to 100)")
    for required in ("task.toml", "instruction.md", "tests/test.sh"):
        if required not in files:
            raise TaskFormatError(required, "is missing: a task needs task.toml, instruction.md, tests/test.sh and environment/Dockerfile")
    config, unknown = parse_task_toml(files["task.toml"])
    if not has_environment(files, config):
        raise TaskFormatError("environment/Dockerfile", "is missing, and there is no compose file in environment/ nor [environment] docker_image")
    raw = files["instruction.md"]
    if len(raw) > MAX_INSTRUCTION_BYTES:
        raise TaskFormatError("instruction.md", f"is {len(raw):,} bytes; the limit is {MAX_INSTRUCTION_BYTES:,}")
    try:
        instruction = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TaskFormatError("instruction.md", "is not UTF-8 text") from None
    if not instruction.strip():
        raise TaskFormatError("instruction.md", "is empty: it is what the agent is asked")
    if "\x00" in instruction:
        raise TaskFormatError("instruction.md", "holds a NUL character")
    return ParsedTask(
        name=name,
        files=files,
        config=config,
        unknown_keys=unknown,
        instruction=instruction,
        agent_timeout_sec=float(config.get("agent", {}).get("timeout_sec", DEFAULT_AGENT_TIMEOUT_SEC)),
        verifier_timeout_sec=float(config.get("verifier", {}).get("timeout_sec", DEFAULT_VERIFIER_TIMEOUT_SEC)),
        has_solution=any(path.startswith("solution/") for path in files),
        digest=content_digest(files),
    )


def split_tasks(files: dict[str, bytes], single_name: str) -> dict[str, dict[str, bytes]]:
    """A folder's files by task: each directory holding a task.toml is one task, named for that directory; a folder
    that is itself a task (task.toml at its root) is a set of one, named `single_name`. Files outside every task
    (a README beside the tasks) are not part of the set and are not stored."""
    roots = sorted({path.rpartition("/")[0] for path in files if path == "task.toml" or path.endswith("/task.toml")})
    if not roots:
        raise TaskFormatError("task.toml", "no task found: a task is a directory holding task.toml")
    if "" in roots:
        roots = [""]  # task.toml files deeper down belong to this task's own files (tests/fixtures...)
    else:
        for outer in roots:
            if inner := next((r for r in roots if r != outer and r.startswith(outer + "/")), None):
                raise TaskFormatError(f"{inner}/task.toml", f"is inside the task {outer}/: tasks cannot nest")
    tasks: dict[str, dict[str, bytes]] = {}
    for root in roots:
        name = root.rpartition("/")[2] if root else single_name
        if name in tasks:
            raise TaskFormatError(f"{root}/task.toml", f"a second task named {name!r}: task names must be unique in a set")
        prefix = f"{root}/" if root else ""
        tasks[name] = {path[len(prefix) :]: data for path, data in files.items() if path.startswith(prefix)}
    return tasks


def parse_task_set(files: dict[str, bytes], single_name: str) -> list[ParsedTask]:
    """Every task of a folder, parsed; the first error refuses the whole set, naming the task's file."""
    parsed = []
    for name, task_files in split_tasks(files, single_name).items():
        try:
            parsed.append(parse_task(name, task_files))
        except TaskFormatError as exc:
            raise exc.within(name) from None
    return parsed


def content_digest(files: dict[str, bytes]) -> str:
    """SHA-256 over the sorted paths and their bytes, each length-prefixed so no two different folders hash alike."""
    sha = hashlib.sha256()
    for path in sorted(files):
        name = path.encode()
        sha.update(len(name).to_bytes(8, "big") + name + len(files[path]).to_bytes(8, "big"))
        sha.update(files[path])
    return sha.hexdigest()
