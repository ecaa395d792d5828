"""A trial's verifier, which nothing the agent wrote or left running can change, except the outputs it grades.

What holds, whichever way the verifier runs (in place, or sealed: trials.py):

- every process of the agent is gone before the verifier starts (`end_agent`: SIGKILL to all of the sandbox
  user's processes, again until none is left, so a process forking as it dies is caught too);
- the verifier runs as a user of its own (spec.VERIFIER_USER), which no process of the agent's could signal, trace
  or write as, with the platform's clean environment (`environment`): the system's PATH from read-only folders,
  an empty home of its own, no Python user site, and nothing the agent set (PYTHONPATH, PYTHONSTARTUP, BASH_ENV,
  ENV, LD_*: the agent's variables are its exec's, never the verifier's); the task's own [verifier.env] and its
  Dockerfile's ENV on top, less any PATH entry under a folder the agent could write;
- `tests/` belongs to root (the agent can read it once it is there, never change it), and `/logs/verifier` to the
  verifier's user alone, on a volume the platform reads from outside: the reward is read by the engine (its
  archive API, `Sandbox.fetch`), not by a command inside, a regular file only and at most MAX_REWARD_BYTES;
- whatever the verifier left running is killed before its reward is read.

A verifier that runs the agent's code as itself can be forged by that code (it may write the reward, or kill the
verifier's shell after writing it). So a task may ship `tests/candidate.sh` (Belvedir's own; Harbor ignores it):
the platform runs it first, as the agent's user in the same clean environment, with /tests in place and its
results in /logs/candidate (emptied first), then kills every process of the agent's user again; the verifier reads
those results as data. The agent's code then never runs as the verifier (`run_candidate`).

Python inside runs with PYTHONSAFEPATH: neither the working folder (the agent's) nor a script's folder is put first
on sys.path, so a `pytest.py` or `sitecustomize.py` the agent left in /app is not what `python -m pytest` imports. A
task that needs otherwise says so in its [verifier.env], and the audit (audit.py) shows what that opens.
"""

import json
import math
import posixpath
import time
from dataclasses import dataclass

from belvedir.sandbox.backend import Sandbox
from belvedir.sandbox.errors import SandboxError, SandboxFileMissing, SandboxFileRefused, SandboxFileTooLarge, SandboxTimeout
from belvedir.sandbox.spec import HOME, ROOT_USER, SYSTEM_PATH, VERIFIER_HOME, VERIFIER_USER, Folder

TESTS_DIR = "/tests"
LOGS_DIR = "/logs"
VERIFIER_DIR = "/logs/verifier"
CANDIDATE_DIR = "/logs/candidate"
CANDIDATE_SCRIPT = "candidate.sh"
# A reward is one number: a file longer than this is not one.
MAX_REWARD_BYTES = 4096
# What the platform's clean environment starts from; the task's own settings go on top (`environment`).
CLEAN = {
    "PATH": SYSTEM_PATH,
    "HOME": VERIFIER_HOME,
    "TMPDIR": VERIFIER_HOME,
    "LANG": "C.UTF-8",
    "PYTHONNOUSERSITE": "1",
    "PYTHONSAFEPATH": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class RewardError(ValueError):
    """The verifier's output is no reward: the message says why."""


def folders() -> tuple[Folder, ...]:
    """The verifier's places in a trial's sandbox: its tests (root's), its output (its own, read from outside) and
    an empty home; /logs itself is the agent's (/logs/agent holds its trajectory)."""
    return (
        Folder(LOGS_DIR),
        Folder(CANDIDATE_DIR),
        Folder(TESTS_DIR, owner="root"),
        Folder(VERIFIER_DIR, owner="verifier", outside=True),
        Folder(VERIFIER_HOME, owner="verifier", mode=0o700),
    )


def environment(task_env: dict[str, str], verifier_env: dict[str, str], agent_writes: tuple[str, ...]) -> dict[str, str]:
    """The verifier's environment: CLEAN, then the Dockerfile's ENV (`task_env`), then task.toml's [verifier.env]. A
    PATH from the Dockerfile keeps only folders the agent could not write (its image's own); "$PATH" in it is the
    system's. [verifier.env] is the task author's explicit word and is taken as written."""
    env = {**CLEAN, **{k: v for k, v in task_env.items() if k != "PATH"}}
    if "PATH" in task_env:
        entries = task_env["PATH"].replace("${PATH}", SYSTEM_PATH).replace("$PATH", SYSTEM_PATH).split(":")
        kept = [e for e in entries if e.startswith("/") and not _under(posixpath.normpath(e), (HOME, "/tmp", LOGS_DIR, *agent_writes))]
        env["PATH"] = ":".join(dict.fromkeys(kept)) or SYSTEM_PATH
    return {**env, **verifier_env}


def _under(path: str, places) -> bool:
    return any(path == place or path.startswith(place.rstrip("/") + "/") for place in places)


def end_processes(box: Sandbox, user: str, what: str):
    """Every process of `user` in the sandbox killed, until none is left (Sandbox.end_processes)."""
    if not box.end_processes(user):
        raise SandboxError(f"{what} kept starting processes through round after round of SIGKILL; no verifier ran.")


def put_tests(box: Sandbox, tests: dict[str, bytes]):
    """The task's tests into /tests, root's: readable by every user, writable by none in the sandbox."""
    box.put_files(TESTS_DIR, tests, mode=0o755, user=ROOT_USER)


@dataclass
class Verdict:
    exit_code: int
    seconds: float
    output: str
    reward: float


def run(box: Sandbox, tests: dict[str, bytes], *, env: dict[str, str], workdir: str, timeout: float) -> Verdict:
    """The tests put in; the task's candidate phase, if it has one; the tests as the verifier's user in its clean
    environment; whatever it left running killed; its reward read from outside. Both phases share the task's verifier
    time limit. SandboxTimeout past it; RewardError when what it wrote is no reward."""
    put_tests(box, tests)
    started, said = time.monotonic(), ""
    if CANDIDATE_SCRIPT in tests:
        said = run_candidate(box, env=env, workdir=workdir, timeout=timeout)
    left = max(timeout - (time.monotonic() - started), 1)
    try:
        ran = box.exec(["/bin/bash", f"{TESTS_DIR}/test.sh"], timeout=left, env=env, workdir=workdir, user=VERIFIER_USER, tail_bytes=4096)
    except SandboxTimeout as exc:
        raise SandboxTimeout(f"The verifier ran past the task's verifier time limit of {timeout:g} s; no reward was read.") from exc
    end_processes(box, VERIFIER_USER, "The verifier")
    output = f"{said}$ tests/test.sh\n{ran.output}" if said else ran.output
    return Verdict(ran.exit_code, round(time.monotonic() - started, 3), output, read_reward(box, ran.exit_code))


def run_candidate(box: Sandbox, *, env: dict[str, str], workdir: str, timeout: float) -> str:
    """tests/candidate.sh as the agent's user (the sandbox's), its results in /logs/candidate (emptied of whatever the
    agent left there first), then every process of that user killed: the agent's code runs, but never as the verifier.
    What it printed, for the verifier's output."""
    script = f"find {CANDIDATE_DIR} -mindepth 1 -delete && exec /bin/bash {TESTS_DIR}/{CANDIDATE_SCRIPT}"
    candidate_env = {**env, "HOME": "/tmp", "TMPDIR": "/tmp", "CANDIDATE_DIR": CANDIDATE_DIR}
    try:
        ran = box.exec(["/bin/sh", "-c", script], timeout=timeout, env=candidate_env, workdir=workdir, tail_bytes=2048)
    except SandboxTimeout as exc:
        raise SandboxTimeout(f"tests/{CANDIDATE_SCRIPT} ran past the task's verifier time limit of {timeout:g} s; no reward was read.") from exc
    end_processes(box, box.spec.user, "The agent's code")
    return f"$ tests/{CANDIDATE_SCRIPT} (as the agent's user; exit {ran.exit_code})\n{ran.output}\n"


def read_reward(box: Sandbox, verifier_exit: int) -> float:
    """reward.txt or reward.json in /logs/verifier, read by the engine from outside the sandbox."""
    for name in ("reward.txt", "reward.json"):
        path = f"{VERIFIER_DIR}/{name}"
        try:
            raw = box.fetch(path, MAX_REWARD_BYTES)
        except SandboxFileMissing:
            continue
        except SandboxFileTooLarge:
            raise RewardError(f"{path} is larger than {MAX_REWARD_BYTES} bytes: not a reward") from None
        except SandboxFileRefused as exc:
            raise RewardError(f"{exc.message} A reward is a regular file the verifier writes.") from None
        return parse_reward(raw, path)
    raise RewardError(f"The verifier wrote no reward ({VERIFIER_DIR}/reward.txt or reward.json); it exited with code {verifier_exit}.")


def parse_reward(raw: bytes, source: str) -> float:
    """The reward in a verifier's reward.txt (a number) or reward.json ({"reward": number}), in [0, 1]."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise RewardError(f"{source} is not UTF-8 text") from None
    if source.endswith(".json"):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise RewardError(f"{source} is not JSON: {_shown(text)}") from None
        if not isinstance(value, dict) or "reward" not in value:
            raise RewardError(f'{source} has no "reward" key: {_shown(text)}')
        value = value["reward"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RewardError(f'{source}\'s "reward" is not a number: {_shown(json.dumps(value))}')
        number = float(value)
    else:
        try:
            number = float(text)
        except ValueError:
            raise RewardError(f"{source} holds {_shown(text)}, not a number") from None
    if not math.isfinite(number) or not 0 <= number <= 1:
        raise RewardError(f"{source} holds {_shown(text)}, outside [0, 1]")
    return number


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")
