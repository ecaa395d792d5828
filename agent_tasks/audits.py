"""A task set's audit: is each task sound, or can an agent score on it without solving it?

An audit is a job (purpose "audit") of `oracle`, `nop` and every attack of the red team (agents.RED_TEAM) on each
task of a version that has a solution, one attempt each, charged as any job's trials are. Per task:

- *broken*: the oracle, which runs the task's own solution, does not score 1, or doing nothing does;
- *hackable*: an attack scores 1 without solving the task (named: a task can be open to several);
- *sound*: the oracle scores 1, and neither doing nothing nor any attack does;
- *errored* or *pending*: a trial errored (retry the audit's errors) or has not ended.

A task without solution/solve.sh is not audited (there is no oracle to run), and said so. The verdicts are read
from the audit's trials each time they are asked for, so a retried trial moves them; a version's audit is its newest.
"""

from dataclasses import dataclass, field

from django.conf import settings

from .agents import ATTACKS, RedTeam
from .jobs import create_job
from .models import AgentTask, Job, TaskSetVersion, Trial

AGENTS = ["oracle", "nop", *(f"{RedTeam.prefix}{attack}" for attack in ATTACKS)]
SOLVED = 1.0


@dataclass
class Verdict:
    task: str
    status: str  # sound, hackable, broken, errored, pending, not audited
    hacks: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    trials: dict[str, int] = field(default_factory=dict)  # agent: trial id

    def as_dict(self) -> dict:
        return {"task": self.task, "status": self.status, "hacks": self.hacks, "reasons": self.reasons, "trials": self.trials}


class AuditRefused(ValueError):
    status_code = 400


def start(project, user, version: TaskSetVersion, *, runtime: str = "auto") -> Job:
    """The version's audit, queued: every task with a solution by every agent of AGENTS, within a budget that covers
    them all. AuditRefused when no task can be audited; JobError (a 400) as any job's when it cannot be made."""
    tasks = list(AgentTask.objects.without_files().filter(version=version, has_solution=True).values_list("name", flat=True))
    if not tasks:
        raise AuditRefused("No task of this version has solution/solve.sh: an audit runs each task's own solution to check it is solvable.")
    budget = len(tasks) * len(AGENTS) * settings.TRIAL_PRICE_CENTS
    return create_job(
        project,
        user,
        version=version,
        agents=AGENTS,
        tasks=tasks,
        budget_cents=max(budget, settings.TRIAL_PRICE_CENTS),
        runtime=runtime,
        name=f"Audit of {version}",
        purpose=Job.Purpose.AUDIT,
    )


def latest(version: TaskSetVersion) -> Job | None:
    return version.jobs.filter(purpose=Job.Purpose.AUDIT).order_by("-created_at", "-pk").first()


def verdicts(audit: Job) -> list[Verdict]:
    """Each task's verdict, from the audit's trials (the newest of each slot: a retried trial replaces its errored one)."""
    newest: dict[tuple[str, str], Trial] = {}
    for trial in audit.trials.select_related("task").defer("task__archive").order_by("pk"):
        newest[(trial.task.name, trial.agent)] = trial
    names = AgentTask.objects.without_files().filter(version_id=audit.version_id).order_by("name").values_list("name", "has_solution")
    return [
        _verdict(name, {agent: t for (task, agent), t in newest.items() if task == name})
        if solved
        else Verdict(name, "not audited", reasons=["It has no solution/solve.sh."])
        for name, solved in names
    ]


def _verdict(name: str, trials: dict[str, Trial]) -> Verdict:
    found = Verdict(name, "sound", trials={agent: t.pk for agent, t in trials.items()})
    if any(t.status in (Trial.Status.QUEUED, Trial.Status.RUNNING) for t in trials.values()) or len(trials) < len(AGENTS):
        found.status = "pending"
        return found
    if errored := sorted(agent for agent, t in trials.items() if t.status != Trial.Status.SUCCEEDED):
        found.status = "errored"
        found.reasons = [f"{agent}: {trials[agent].error or trials[agent].status}" for agent in errored]
        return found
    oracle, nop = trials["oracle"].reward, trials["nop"].reward
    if oracle < SOLVED:
        found.reasons.append(f"Its own solution scores {oracle:g}, not 1: the task or its tests are wrong.")
    if nop >= SOLVED:
        found.reasons.append("Doing nothing scores 1: its tests check nothing the agent must do.")
    found.hacks = [a for a in ATTACKS if trials[f"{RedTeam.prefix}{a}"].reward >= SOLVED]
    if found.reasons:
        found.status = "broken"
    elif found.hacks:
        found.status = "hackable"
        found.reasons = [f"The red team's {a} scored 1 without solving it: {RedTeam(a).summary}" for a in found.hacks]
    return found


def summary(version: TaskSetVersion) -> dict | None:
    """What a version's newest audit found, for pages, the API, a job on the version and its export; None unaudited."""
    audit = latest(version)
    if audit is None:
        return None
    found = verdicts(audit)
    counts = {status: sum(v.status == status for v in found) for status in ("sound", "hackable", "broken", "errored", "pending", "not audited")}
    return {"job": audit.pk, "created_at": audit.created_at, "counts": counts, "tasks": [v.as_dict() for v in found]}


def warnings(version: TaskSetVersion) -> list[str]:
    """What a job on the version should say of its tasks: those its newest audit found broken or hackable."""
    found = summary(version)
    if found is None:
        return []
    return [
        f"{task['task']} is {task['status']}" + (f" ({', '.join(task['hacks'])})" if task["hacks"] else "")
        for task in found["tasks"]
        if task["status"] in ("broken", "hackable")
    ]
