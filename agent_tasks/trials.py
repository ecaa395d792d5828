"""A trial: one agent's attempt at one task, in a fresh sandbox of its own.

The order is what keeps a reward honest (issue #44): the task's environment goes in, then the agent's phase
runs under the task's agent time limit; only when it is over, and every process the agent left behind is
killed, do the verifier's files (`tests/`) go in at /tests, into a /logs/verifier emptied of whatever the agent
wrote there (the trial is flagged for it). The reward is what the verifier wrote, and nothing else: a missing
or unreadable one errors the trial, as does any fault of the platform; neither is ever a reward of 0.

Agents are typed: an `Agent` says what command its phase runs and whether it may see the task's solution. The
built-in ones are `oracle` (runs solution/solve.sh, from /solution, the only agent that gets it) and `nop`
(does nothing); agents that call models come with jobs.
"""

import json
import logging
import math
import os
import re
import shlex
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from belvedir.redaction import Redactor
from belvedir.sandbox import egress
from belvedir.sandbox.backend import Sandbox
from belvedir.sandbox.errors import ImageBuildFailed, NoCapacity, SandboxError, SandboxFileMissing, SandboxFileTooLarge, SandboxPlatformError, SandboxTimeout
from belvedir.sandbox.launch import Placement, workload
from belvedir.sandbox.owners import Owner
from belvedir.sandbox.spec import Limits, SandboxSpec

from . import environment, trace_keys
from .agents import SOLUTION_DIR, TRAJECTORY_FILE, Agent, resolve
from .models import AgentTask, TaskSetVersion, Trial

logger = logging.getLogger(__name__)

OWNER_KIND = "trial"
TESTS_DIR = "/tests"
LOGS_DIR = "/logs"
VERIFIER_DIR = "/logs/verifier"
# What a trial keeps of each phase's output (the exec's tail is 4 KB of bytes).
OUTPUT_TAIL = 4096
# A reward is one number: a file longer than this is not one.
MAX_REWARD_BYTES = 4096
# The agent's command is stopped by `timeout` inside the sandbox, so the verifier still runs after an agent that
# ran out of time; the sandbox's own deadline (which kills it) is the backstop past this much more.
AGENT_GRACE_SECONDS = 30
# Room for starting the sandbox, placing files and reading the reward, on top of the task's two time limits:
# a trial still `running` past all of it has lost its worker (reap_stale_trials).
SETUP_SECONDS = 300


class RewardError(ValueError):
    """The verifier's output is no reward: the message says why."""


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


@dataclass
class TrialResult:
    """What happened in the sandbox: saved onto the Trial when it ends."""

    reward: float | None = None
    agent_exit: int | None = None
    verifier_exit: int | None = None
    agent_seconds: float | None = None
    verifier_seconds: float | None = None
    agent_output: str = ""
    verifier_output: str = ""
    error: str = ""
    platform_fault: bool = False
    limits: dict = field(default_factory=dict)
    trajectory: dict = field(default_factory=dict)
    flag_reasons: list[str] = field(default_factory=list)
    runtime: str = ""


def run_trial(task: AgentTask, agent: str | Agent, *, attempt: int = 1, runtime_wanted: str = "auto") -> Trial:
    """One trial outside a job, run here and now, ended `succeeded` (with a reward) or `errored` (with the reason).

    EnvironmentRefused (nothing stored) when the task's Dockerfile cannot be run without a build."""
    agent = resolve(agent) if isinstance(agent, str) else agent
    environment.resolve(task.files("environment"))
    trial = Trial.objects.create(task=task, agent=agent.name, attempt=attempt, started_at=timezone.now(), deadline_at=deadline_for(task))
    try:
        return execute(trial, agent, runtime_wanted=runtime_wanted)
    except NoCapacity as exc:
        return _finish(trial, TrialResult(error=f"The platform failed; retry this trial: {exc.message}", platform_fault=True))


def deadline_for(task: AgentTask):
    return timezone.now() + timedelta(seconds=seconds_needed(task))


def seconds_needed(task: AgentTask) -> float:
    """The longest a trial of the task may take: a build may come first (images.py), whether this trial builds or
    waits for another's, then the agent's and the verifier's limits."""
    building = min(task.build_timeout_sec, settings.SANDBOX_BUILD_MAX_SECONDS)
    return building + task.agent_timeout_sec + AGENT_GRACE_SECONDS + task.verifier_timeout_sec + SETUP_SECONDS


def execute(trial: Trial, agent: Agent | None = None, *, runtime_wanted: str = "auto") -> Trial:
    """A `running` trial's sandbox from start to end, and the trial ended with what happened.

    NoCapacity, before anything ran, when no host has room: the caller decides whether that is a wait (a job) or
    an error."""
    task = trial.task
    agent = agent or resolve(trial.agent, trial.job.agent_commands if trial.job_id else {})
    result = TrialResult()
    try:
        env = environment.resolve(task.files("environment"))
    except environment.EnvironmentRefused as exc:
        return _finish(trial, TrialResult(error=str(exc)))
    owner = Owner(OWNER_KIND, trial.pk)
    if agent.uses_model and trial.deployment is None:
        return _finish(trial, TrialResult(error="Its deployment was deleted before the trial started; nothing ran."))
    setup = agent.setup(task, trial.deployment) if agent.uses_model else None
    writable = (*env.folders, TESTS_DIR, LOGS_DIR, *((SOLUTION_DIR,) if agent.sees_solution else ()), *(setup.files if setup else ()))
    limits, result.limits = task_limits(task)
    agent_env = dict(env.env)
    secrets = []
    recipe = env.recipe(task.build_timeout_sec)

    def spec_for(place: Placement) -> SandboxSpec:
        runtime = place.runtime if runtime_wanted == "auto" else runtime_wanted
        return SandboxSpec(
            owner=owner,
            image=env.image,
            recipe=recipe,
            limits=limits,
            network=egress.NETWORK if setup else "none",
            runtime=runtime,
            workdir=env.workdir,
            writable=writable,
        )

    try:
        if setup:
            secrets = _credentials(trial, owner, setup, agent_env)
        with workload(owner, spec_for) as box:
            result.runtime = box.runtime
            _run(box, task, agent, env, agent_env, setup, result)
    except NoCapacity:
        raise
    except SandboxPlatformError as exc:
        result.error, result.platform_fault = f"The platform failed; retry this trial: {exc.message}", True
    except SandboxTimeout as exc:
        result.error = exc.message
    except ImageBuildFailed as exc:
        result.error = f"The task's environment did not build: {exc.message}"
    except SandboxError as exc:
        result.error = f"The sandbox stopped: {exc.message}"
    except RewardError as exc:
        result.error = str(exc)
    except Exception:
        # Ours, not the agent's: ended now rather than left running until the reaper's deadline.
        logger.exception("trial %s crashed", trial.pk)
        result.error, result.platform_fault = "An internal error stopped this trial; retry it.", True
    finally:
        if setup:
            end_credentials(trial)
    if secrets:
        redactor = Redactor(secrets)
        result.agent_output, result.verifier_output = redactor.text(result.agent_output), redactor.text(result.verifier_output)
        result.trajectory = redactor.value(result.trajectory)
    return _finish(trial, result)


def _credentials(trial: Trial, owner: Owner, setup, agent_env: dict) -> list[str]:
    """A model agent's egress grant and trace key, into its environment; the secrets it was given, to mask."""
    # The model's host is the only destination the agent may reach (the platform's origins aside): a benchmark's
    # website, its repository or a package index stay refused, and the egress record shows it.
    _, token = egress.issue_grant(owner, domains=setup.domains)
    agent_env.update(setup.env)
    agent_env.update(egress.sandbox_env(egress.proxy_url(owner, token)))
    secrets = [token, *setup.secrets]
    if traced := trace_keys.issue(trial, given=secrets):
        agent_env.update(traced[0])
        secrets.append(traced[1])
    return secrets


def end_credentials(trial: Trial):
    """However a trial ends (its worker, the reaper), its egress grant and its trace key die with it."""
    egress.revoke_grant(Owner(OWNER_KIND, trial.pk))
    trace_keys.revoke(trial)


def task_limits(task: AgentTask) -> tuple[Limits, dict]:
    """The sandbox's limits from the task's `[environment]` cpus and memory_mb (the platform's defaults where it names
    none), held to what a host gives one sandbox; and what was applied, with what was held back, for the record
    (Terminal-Bench's rules refuse a job whose resources differ from the tasks')."""
    asked = task.config.get("environment", {})
    limits = Limits.defaults()
    cpus, memory = asked.get("cpus"), asked.get("memory_mb") or _megabytes(asked.get("memory"))
    held = []
    if cpus:
        most = os.cpu_count() or 1
        if cpus > most:
            held.append(f"cpus {cpus} held to this host's {most}")
        limits = Limits.defaults(cpus=float(min(cpus, most)))
    if memory:
        most = settings.TRIAL_MAX_MEMORY_MB
        if memory > most:
            held.append(f"memory_mb {memory} held to {most} (BELVEDIR_TRIAL_MAX_MEMORY_MB)")
        limits = Limits.defaults(cpus=limits.cpus, memory_mb=min(memory, most))
    return limits, {"cpus": limits.cpus, "memory_mb": limits.memory_mb, "held": held}


def _megabytes(size: str | None) -> int | None:
    """Harbor's deprecated `memory = "2G"` (the format checked it: digits, then K, M, G or T, maybe iB)."""
    if not size:
        return None
    found = re.match(r"\s*(\d+(?:\.\d+)?)\s*([KMGT])", size, re.IGNORECASE)
    return max(1, int(float(found[1]) * {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[found[2].upper()]))


def _run(box: Sandbox, task: AgentTask, agent: Agent, env: environment.Environment, agent_env: dict, setup, result: TrialResult):
    for folder, files in _by_folder(env.files).items():
        box.put_files(folder, files)
    for folder, files in (setup.files if setup else {}).items():
        box.put_files(folder, files)
    command = agent.command(task)
    if command:
        if agent.sees_solution:
            box.put_files(SOLUTION_DIR, _under(task.files("solution"), "solution/"), mode=0o755)
        limit = task.agent_timeout_sec
        wrapped = f"timeout -k 5 {limit:g} bash -c {shlex.quote(command)}"
        try:
            ran = box.exec(wrapped, timeout=limit + AGENT_GRACE_SECONDS, env=agent_env, workdir=env.workdir, tail_bytes=4096)
        except SandboxTimeout as exc:
            raise SandboxTimeout(f"The agent's phase outlived its time limit of {limit:g} s and its stop; the sandbox was killed and no verifier ran.") from exc
        result.agent_exit, result.agent_seconds, result.agent_output = ran.exit_code, round(ran.duration, 3), ran.output
    # Whatever the agent left running could still write the reward, or rewrite the verifier, once they are in: it
    # is killed first (kill -1 spares the shell that sends it), in the same exec that empties the verifier's
    # folders (one exec less: ~0.2 s under gVisor). The agent's own /logs/agent stays, for its trajectory.
    # /logs/verifier itself is removed and made again: the agent may have left a link there to a folder of its own.
    left = box.exec(
        f"kill -9 -1 2>/dev/null; {{ find {TESTS_DIR} {VERIFIER_DIR} -mindepth 1 2>/dev/null; [ -L {VERIFIER_DIR} ] && echo {VERIFIER_DIR}; }} | head -n 5;"
        f" chmod -R u+rwX {TESTS_DIR} 2>/dev/null; find {TESTS_DIR} -mindepth 1 -delete 2>/dev/null; rm -rf {VERIFIER_DIR};"
        f' mkdir {VERIFIER_DIR} && test -z "$(find {TESTS_DIR} {VERIFIER_DIR} -mindepth 1 | head -n 1)"',
        timeout=60,
        workdir="/",
    )
    if setup:
        result.trajectory = _trajectory(box)
        result.flag_reasons += flags_in(result.trajectory)
    if left.exit_code != 0:
        # The agent's doing (it filled the sandbox's memory, whose pages the writable folders are), not the
        # platform's: an error of this trial, charged, or filling the disk would make any trial free.
        raise SandboxError(
            f"The verifier's folders could not be made ready after the agent's phase; the agent may have filled its sandbox's memory or disk: {left.output[-300:]}"
        )
    if written := left.output.split():
        result.flag_reasons.append(f"The agent wrote where the verifier's files and reward go ({', '.join(written)}); removed before the verifier ran.")
    box.put_files(TESTS_DIR, _under(task.files("tests"), "tests/"), mode=0o755)
    verifier_env = {**env.env, **task.config.get("verifier", {}).get("env", {})}
    try:
        ran = box.exec(f"bash {TESTS_DIR}/test.sh", timeout=task.verifier_timeout_sec, env=verifier_env, workdir=env.workdir, tail_bytes=4096)
    except SandboxTimeout as exc:
        raise SandboxTimeout(f"The verifier ran past the task's verifier time limit of {task.verifier_timeout_sec:g} s; no reward was read.") from exc
    result.verifier_exit, result.verifier_seconds, result.verifier_output = ran.exit_code, round(ran.duration, 3), ran.output
    result.reward = _reward(box, ran.exit_code)


# Commands naming the verifier's or the solution's files: an agent looking for the answer (it finds none during its
# phase, but the attempt is what a reviewer wants to see).
PEEKING = re.compile(r"solve\.sh|(^|[\s/'\"])(solution|tests)/|test\.sh|reward\.(txt|json)|/logs/verifier")


def _trajectory(box: Sandbox) -> dict:
    """The agent's own account of its phase (its steps, each model turn's tokens, each command), {} without one."""
    try:
        raw = box.read_file(TRAJECTORY_FILE, settings.TRIAL_TRAJECTORY_MAX_BYTES)
    except SandboxFileMissing:
        return {}
    except SandboxFileTooLarge:
        return {"error": f"{TRAJECTORY_FILE} is larger than {settings.TRIAL_TRAJECTORY_MAX_BYTES} bytes; not kept."}
    try:
        found = json.loads(raw)
    except (ValueError, RecursionError):
        return {"error": f"{TRAJECTORY_FILE} is not JSON; not kept."}
    return found if isinstance(found, dict) else {"error": f"{TRAJECTORY_FILE} is not a JSON object; not kept."}


def flags_in(trajectory: dict) -> list[str]:
    """A flag for each command of the agent that named a test's, the verifier's or the solution's files."""
    commands = [
        c.get("command", "") for step in trajectory.get("steps") or [] if isinstance(step, dict) for c in step.get("commands") or [] if isinstance(c, dict)
    ]
    peeked = [c for c in commands if isinstance(c, str) and PEEKING.search(c)]
    return [f"The agent's command named a test's or the solution's files: {c[:200]!r}" for c in peeked[:5]]


def tokens(trajectory: dict) -> tuple[int, int]:
    """Input and output tokens over the agent's steps, as its model reported them."""
    up = down = 0
    for step in trajectory.get("steps") or []:
        usage = step.get("usage") if isinstance(step, dict) else None
        if isinstance(usage, dict):
            up += _count(usage.get("prompt_tokens") or usage.get("input_tokens"))
            down += _count(usage.get("completion_tokens") or usage.get("output_tokens"))
    return up, down


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _reward(box: Sandbox, verifier_exit: int) -> float:
    for name in ("reward.txt", "reward.json"):
        path = f"{VERIFIER_DIR}/{name}"
        try:
            raw = box.read_file(path, MAX_REWARD_BYTES)
        except SandboxFileMissing:
            continue
        except SandboxFileTooLarge:
            raise RewardError(f"{path} is larger than {MAX_REWARD_BYTES} bytes: not a reward") from None
        return parse_reward(raw, path)
    raise RewardError(f"The verifier wrote no reward ({VERIFIER_DIR}/reward.txt or reward.json); it exited with code {verifier_exit}.")


def _under(files: dict[str, bytes], prefix: str) -> dict[str, bytes]:
    return {path[len(prefix) :]: data for path, data in files.items()}


def _by_folder(files: dict[str, bytes]) -> dict[str, dict[str, bytes]]:
    """{absolute path: bytes} as put_files wants them: by top-level folder, names relative to it."""
    grouped: dict[str, dict[str, bytes]] = {}
    for path, data in files.items():
        top, _, rest = path.lstrip("/").partition("/")
        grouped.setdefault(f"/{top}", {})[rest] = data
    return grouped


def _finish(trial: Trial, result: TrialResult) -> Trial:
    used = tokens(result.trajectory)
    fields = dict(
        status=Trial.Status.ERRORED if result.error else Trial.Status.SUCCEEDED,
        reward=None if result.error else result.reward,
        agent_exit=result.agent_exit,
        verifier_exit=result.verifier_exit,
        agent_seconds=result.agent_seconds,
        verifier_seconds=result.verifier_seconds,
        agent_output=result.agent_output[-OUTPUT_TAIL:],
        verifier_output=result.verifier_output[-OUTPUT_TAIL:],
        error=result.error[:2000],
        platform_fault=result.platform_fault,
        limits=result.limits,
        trajectory=result.trajectory,
        input_tokens=used[0],
        output_tokens=used[1],
        flagged=bool(result.flag_reasons),
        flag_reasons=result.flag_reasons,
        runtime=result.runtime,
        finished_at=timezone.now(),
    )
    # Conditional: a trial the reaper ended meanwhile stays as the reaper left it.
    Trial.objects.filter(pk=trial.pk, status=Trial.Status.RUNNING).update(**fields)
    trial.refresh_from_db()
    return trial


def run_trials(version: TaskSetVersion, agents: list[str], attempts: int = 1, *, runtime_wanted: str = "auto") -> list[Trial]:
    """Every task of a version by every agent, `attempts` times each, one after another (jobs will spread them)."""
    return [
        run_trial(task, agent, attempt=attempt, runtime_wanted=runtime_wanted)
        for task in version.tasks.all()
        for agent in agents
        for attempt in range(1, attempts + 1)
    ]
