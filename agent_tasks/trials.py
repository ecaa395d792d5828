"""A trial: one agent's attempt at one task, in a fresh sandbox of its own.

The order is what keeps a reward honest: the task's environment goes in, then the agent's phase runs under the
task's agent time limit; only when it is over, and every process of the agent is gone, does the verifier run, as
its own user in a clean environment, its tests root's and its output read from outside the sandbox (verifier.py).
The reward is what the verifier wrote, and nothing else: a missing or unreadable one errors the trial, as does
any fault of the platform; neither is ever a reward of 0.

Where the verifier runs, the task says ([verifier] mode): in place (the default, as Harbor runs tasks: the
agent's sandbox once the agent is gone, so a task that checks an installed file or a service still works), or
sealed (a fresh sandbox of the task's image holding only the outputs its task declares, copied out of the agent's:
nothing else the agent left behind reaches it). Declared outputs are kept with the trial either way, with the
digest of what was graded (outputs.py), and a regrade grades them again (regrades.py).

Agents are typed: an `Agent` says what command its phase runs and whether it may see the task's solution. The
built-in ones are `oracle` (runs solution/solve.sh, from /solution, the only agent that gets it), `nop` (does
nothing) and the red team's (redteam.py); agents that call models come with jobs.

Each trial is a paid workload (billing/workloads.py): charged at its start (jobs.claim), ended with its credentials
revoked and, when the platform failed it, refunded, in one transaction (`finish`).
"""

import json
import logging
import os
import re
import shlex
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from belvedir.redaction import Redactor
from belvedir.sandbox import egress
from belvedir.sandbox.backend import Sandbox
from belvedir.sandbox.errors import ImageBuildFailed, NoCapacity, SandboxError, SandboxFileMissing, SandboxFileTooLarge, SandboxPlatformError, SandboxTimeout
from belvedir.sandbox.launch import Placement, layout
from belvedir.sandbox.output import clean_output, clean_value
from belvedir.sandbox.owners import Owner
from belvedir.sandbox.spec import HOME, ROOT_USER, SYSTEM_PATH, Folder, Limits, SandboxSpec
from billing import workloads

from . import environment, outputs, trace_keys, verifier
from .agents import SOLUTION_DIR, TRAJECTORY_FILE, Agent, resolve
from .models import AgentTask, Job, TaskSetVersion, Trial, TrialOutputs, trajectory_steps
from .outputs import Outputs, OutputsTooLarge
from .verifier import LOGS_DIR

logger = logging.getLogger(__name__)

OWNER_KIND = "trial"
# What a trial keeps of each phase's output (the exec's tail is 4 KB of bytes).
OUTPUT_TAIL = 4096
# The agent's command is stopped by `timeout` inside the sandbox, so the verifier still runs after an agent that
# ran out of time; the sandbox's own deadline (which kills it) is the backstop past this much more.
AGENT_GRACE_SECONDS = 30
# Room for starting the sandbox, placing files and reading the reward, on top of the task's two time limits:
# a trial still `running` past all of it has lost its worker (the reaper: billing.workloads.reap).
SETUP_SECONDS = 300


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
    verifier_mode: str = ""
    outputs: Outputs | None = None


def run_trial(task: AgentTask, agent: str | Agent, *, attempt: int = 1, runtime_wanted: str = "auto") -> Trial:
    """One trial outside a job, run here and now, ended `succeeded` (with a reward) or `errored` (with the reason).

    EnvironmentRefused (nothing stored) when the task's Dockerfile cannot be run without a build."""
    agent = resolve(agent) if isinstance(agent, str) else agent
    environment.resolve(task.files("environment"))
    trial = Trial.objects.create(task=task, agent=agent.name, attempt=attempt, started_at=timezone.now(), deadline_at=deadline_for(task))
    try:
        return execute(trial, agent, runtime_wanted=runtime_wanted)
    except NoCapacity as exc:
        return finish(trial, TrialResult(error=f"The platform failed; retry this trial: {exc.message}", platform_fault=True))


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
        return finish(trial, TrialResult(error=str(exc)))
    owner = Owner(OWNER_KIND, trial.pk)
    if agent.uses_model and trial.deployment is None:
        # Nothing ran: refunded, as the platform's failures are (a job's claim skips such a trial before charging it).
        return finish(trial, TrialResult(error="Its deployment was deleted before the trial started; nothing ran, and it was refunded.", platform_fault=True))
    setup = agent.setup(task, trial.deployment) if agent.uses_model else None
    limits, result.limits = task_limits(task)
    result.verifier_mode = outputs.mode(task.config)
    agent_env = dict(env.env)
    secrets = []

    def specs_for(place: Placement) -> list[SandboxSpec]:
        runtime = place.runtime if runtime_wanted == "auto" else runtime_wanted
        return sandbox_specs(trial, task, env, agent, setup, limits, runtime)

    try:
        if setup:
            secrets = _credentials(trial, owner, setup, agent_env)
        with layout(owner, specs_for) as boxes:
            result.runtime = boxes[0].runtime
            _run(boxes, task, agent, env, agent_env, setup, result)
    except NoCapacity:
        raise
    except Exception as exc:
        result.error, result.platform_fault = failure(exc, "trial", trial.pk)
    finally:
        if setup:
            end_credentials(trial)
    if secrets:
        redactor = Redactor(secrets)
        result.agent_output, result.verifier_output = redactor.text(result.agent_output), redactor.text(result.verifier_output)
        result.trajectory = redactor.value(result.trajectory)
    return finish(trial, result)


def failure(exc: Exception, noun: str, pk: int) -> tuple[str, bool]:
    """What a trial's or a grade's end says of an exception raised in its sandbox, and whether the platform failed it."""
    if isinstance(exc, SandboxPlatformError):
        return f"The platform failed; retry this {noun}: {exc.message}", True
    if isinstance(exc, SandboxTimeout | OutputsTooLarge):
        return exc.message, False
    if isinstance(exc, ImageBuildFailed):
        return f"The task's environment did not build: {exc.message}", False
    if isinstance(exc, SandboxError):
        return f"The sandbox stopped: {exc.message}", False
    if isinstance(exc, verifier.RewardError):
        return str(exc), False
    # Ours, not the agent's: ended now rather than left running until the reaper's deadline.
    logger.exception("%s %s crashed", noun, pk, exc_info=exc)
    return f"An internal error stopped this {noun}; retry it.", True


def grading_folders(env: environment.Environment) -> tuple[Folder, ...]:
    """A sandbox that grades (a sealed verifier's, a regrade's): the task's folders, group-writable for the verifier
    (in the sandbox user's group) to add to them, and the verifier's own."""
    return (*(Folder(path, mode=0o775) for path in env.folders), *verifier.folders())


def sandbox_specs(trial: Trial, task: AgentTask, env, agent: Agent, setup, limits: Limits, runtime: str) -> list[SandboxSpec]:
    """The agent's sandbox, and for a sealed verifier a second one of the task's image (started beside it, idle until
    the agent is done: its start costs the trial no time)."""
    owner = Owner(OWNER_KIND, trial.pk)
    declared = outputs.declared(task.config)
    sealed = outputs.mode(task.config) == "sealed"
    # The task's folders are group-writable: a verifier (in the sandbox user's group) may add to them in place.
    task_folders = grading_folders(env)[: len(env.folders)]
    agent_folders = (
        *task_folders,
        *((Folder(LOGS_DIR),) if sealed else verifier.folders()),
        *((Folder(SOLUTION_DIR, owner="root"),) if agent.sees_solution else ()),
        *(setup.files if setup else ()),
        *((outputs.export_folder(),) if declared else ()),
    )
    common = dict(owner=owner, image=env.image, recipe=env.recipe(task.build_timeout_sec), limits=limits, runtime=runtime, workdir=env.workdir)
    specs = [SandboxSpec(**common, network=egress.NETWORK if setup else "none", writable=agent_folders)]
    if sealed:
        specs.append(SandboxSpec(**common, network="none", part=1, writable=grading_folders(env)))
    return specs


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


def _run(boxes: list[Sandbox], task: AgentTask, agent: Agent, env: environment.Environment, agent_env: dict, setup, result: TrialResult):
    box = boxes[0]
    for folder, files in _by_folder(env.files).items():
        box.put_files(folder, files)
    for folder, files in (setup.files if setup else {}).items():
        box.put_files(folder, files)
    command = agent.command(task)
    if command:
        if agent.sees_solution:
            box.put_files(SOLUTION_DIR, _under(task.files("solution"), "solution/"), mode=0o755, user=ROOT_USER)
        limit = task.agent_timeout_sec
        wrapped = f"timeout -k 5 {limit:g} bash -c {shlex.quote(command)}"
        try:
            ran = box.exec(wrapped, timeout=limit + AGENT_GRACE_SECONDS, env=agent_env, workdir=env.workdir, tail_bytes=4096)
        except SandboxTimeout as exc:
            raise SandboxTimeout(f"The agent's phase outlived its time limit of {limit:g} s and its stop; the sandbox was killed and no verifier ran.") from exc
        result.agent_exit, result.agent_seconds, result.agent_output = ran.exit_code, round(ran.duration, 3), ran.output
    # Nothing of the agent's may run on into the verifier's phase (it could rewrite what is graded as it is graded).
    verifier.end_processes(box, box.spec.user, "The agent")
    if setup:
        result.trajectory = _trajectory(box)
        result.flag_reasons += flags_in(result.trajectory)
    if declared := outputs.declared(task.config):
        result.outputs = outputs.read(outputs.export(box, declared), declared)
    graded = box
    if result.verifier_mode == "sealed":
        graded = boxes[1]
        seal(graded, env, declared, result.outputs)
    verdict = verify(graded, task, env, agent_writes=tuple(setup.files) if setup else ())
    result.verifier_exit, result.verifier_seconds, result.verifier_output, result.reward = verdict.exit_code, verdict.seconds, verdict.output, verdict.reward


def verify(box: Sandbox, task: AgentTask, env: environment.Environment, agent_writes: tuple[str, ...] = ()) -> verifier.Verdict:
    """The task's tests on the sandbox as it stands (the agent's, in place, or one made ready by `seal`)."""
    verifier_env = verifier.environment(env.env, task.config.get("verifier", {}).get("env", {}), agent_writes=(*env.folders, *agent_writes))
    return verifier.run(box, _under(task.files("tests"), "tests/"), env=verifier_env, workdir=env.workdir, timeout=task.verifier_timeout_sec)


def seal(box: Sandbox, env: environment.Environment, declared: list[str], kept: Outputs):
    """A fresh sandbox of the task's image made ready to grade: the environment's files, then each declared output
    exactly as the agent left it (one it removed is absent here too), owned by the agent's user as it was there."""
    for folder, files in _by_folder(env.files).items():
        box.put_files(folder, files)
    # A declared folder the sandbox mounts (the whole /app) is emptied, not removed: its mount stays.
    mounted = {*env.folders, HOME}
    clear = [f"find {shlex.quote(p)} -mindepth 1 -delete" if p in mounted else f"rm -rf -- {shlex.quote(p)}" for p in declared]
    cleared = box.exec(["/bin/sh", "-c", " && ".join(clear)], timeout=60, env={"PATH": SYSTEM_PATH}, workdir="/")
    if cleared.exit_code != 0:
        raise SandboxPlatformError(f"The verifier's sandbox could not be made ready: {clean_output(cleared.output, 300)}")
    box.put_archive("/", [kept.tar()])


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
    peeked = [c["command"] for step in trajectory_steps(trajectory) for c in step["commands"] if PEEKING.search(c["command"])]
    return [f"The agent's command named a test's or the solution's files: {c[:200]!r}" for c in peeked[:5]]


def tokens(trajectory: dict) -> tuple[int, int]:
    """Input and output tokens over the agent's steps, as its model reported them."""
    up = down = 0
    for step in trajectory_steps(trajectory):
        usage = step["usage"]
        up += _count(usage.get("prompt_tokens") or usage.get("input_tokens"))
        down += _count(usage.get("completion_tokens") or usage.get("output_tokens"))
    return up, down


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _under(files: dict[str, bytes], prefix: str) -> dict[str, bytes]:
    return {path[len(prefix) :]: data for path, data in files.items()}


def _by_folder(files: dict[str, bytes]) -> dict[str, dict[str, bytes]]:
    """{absolute path: bytes} as put_files wants them: by top-level folder, names relative to it."""
    grouped: dict[str, dict[str, bytes]] = {}
    for path, data in files.items():
        top, _, rest = path.lstrip("/").partition("/")
        grouped.setdefault(f"/{top}", {})[rest] = data
    return grouped


def finish(trial: Trial, result: TrialResult) -> Trial:
    """The trial ended with what happened, through the paid workloads' one lifecycle: its credentials revoked and,
    when the platform failed it, its charge given back, with its end, in one transaction. Every text and value that
    came out of its sandbox is stored after the one sanitising step (belvedir.sandbox.output)."""
    used = tokens(result.trajectory)
    error = clean_output(result.error, 2000)
    fields = dict(
        reward=None if error else result.reward,
        agent_exit=result.agent_exit,
        verifier_exit=result.verifier_exit,
        agent_seconds=result.agent_seconds,
        verifier_seconds=result.verifier_seconds,
        agent_output=clean_output(result.agent_output, OUTPUT_TAIL),
        verifier_output=clean_output(result.verifier_output, OUTPUT_TAIL),
        error=error,
        platform_fault=result.platform_fault,
        limits=result.limits,
        trajectory=clean_value(result.trajectory),
        input_tokens=used[0],
        output_tokens=used[1],
        flagged=bool(result.flag_reasons),
        flag_reasons=[clean_output(reason, 500) for reason in result.flag_reasons],
        runtime=result.runtime,
        verifier_mode=result.verifier_mode,
        graded_digest=result.outputs.digest if result.outputs else "",
    )
    if result.outputs and Trial.objects.filter(pk=trial.pk, status=Trial.Status.RUNNING).exists():
        kept = result.outputs
        TrialOutputs.objects.update_or_create(
            trial=trial,
            defaults=dict(
                archive=kept.archive(),
                digest=kept.digest,
                size=kept.size,
                file_count=sum(k == "file" for k, _, _ in kept.entries.values()),
                dropped=kept.dropped[:100],
            ),
        )
    status = Trial.Status.ERRORED if error else Trial.Status.SUCCEEDED
    # From running only: a trial the reaper ended meanwhile stays as the reaper left it.
    workloads.end(TRIALS, trial, status, refund_reason=error if result.platform_fault else "", from_statuses=(Trial.Status.RUNNING,), **fields)
    return trial


def _project(trial: Trial):
    return trial.job.project if trial.job_id else trial.task.version.task_set.project


def _tally(trial: Trial, cents: int):
    """A job's running total of its trials' charges less their refunds moves with each ledger entry."""
    if trial.job_id:
        Job.objects.filter(pk=trial.job_id).update(charged_cents=F("charged_cents") + cents)


def _advance_job(trial: Trial):
    # Imported here: jobs builds on this module (it runs trials), and a trial's end sends its job's next ones.
    from .jobs import advance

    if trial.job_id:
        advance(trial.job_id)


TRIALS = workloads.PaidKind(
    name=OWNER_KIND,
    model=Trial,
    waiting=(Trial.Status.QUEUED,),
    running=(Trial.Status.RUNNING,),
    errored=Trial.Status.ERRORED,
    cancelled=Trial.Status.SKIPPED,
    message_field="error",
    fault_flag="platform_fault",
    faulted=Q(status=Trial.Status.ERRORED, platform_fault=True),
    project=_project,
    # Past its deadline (the task's limits with room: deadline_for) a running trial's worker is gone.
    stale=lambda: Trial.objects.filter(deadline_at__lt=timezone.now()),
    revoke=lambda trial: end_credentials(trial),
    on_money=_tally,
    after_end=_advance_job,
    # A job's cancel stops sending its trials; one running finishes and counts.
    cancel_stops=False,
)


def run_trials(version: TaskSetVersion, agents: list[str], attempts: int = 1, *, runtime_wanted: str = "auto") -> list[Trial]:
    """Every task of a version by every agent, `attempts` times each, one after another (jobs will spread them)."""
    return [
        run_trial(task, agent, attempt=attempt, runtime_wanted=runtime_wanted)
        for task in version.tasks.all()
        for agent in agents
        for attempt in range(1, attempts + 1)
    ]
