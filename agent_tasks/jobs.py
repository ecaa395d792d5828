"""Jobs: agents × deployments × tasks × attempts, each trial charged at its start and sent as hosts have room.

A job's trials are all made at once, `queued`, in the order that covers every task before any second attempt.
`advance` sends as many as the sandbox hosts have free places for (less those sent and not started yet), so a
job of a thousand trials never floods the queue or the hosts; each trial's end, and the scheduled
`advance_all`, send the next. A trial is charged when a worker claims it, under the job's lock, so two workers
never both spend the budget's last cents; one the platform failed is refunded, once.
"""

import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone
from django_q.tasks import async_task

from belvedir import error_share
from belvedir.sandbox.errors import NoCapacity
from belvedir.sandbox.models import ComputeType
from belvedir.sandbox.scheduler import free_places
from billing import workloads
from billing.actions import debt_gate, refuse_if_in_debt
from billing.errors import InsufficientBalance

from .agents import AGENTS, THE_AGENTS, AgentSpecError, resolve
from .models import AgentTask, Job, Trial
from .trials import TRIALS, deadline_for, execute, seconds_needed

logger = logging.getLogger(__name__)

RUNTIMES = ("auto", "runc", "runsc")
MAX_ATTEMPTS = 100
MAX_COMMAND = 2000
MAX_DENY_HOSTS = 100


class JobError(ValueError):
    """A job that cannot be made as asked: the message names the field and why (a 400)."""

    status_code = 400

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field, self.message = field, message

    @property
    def response_fields(self) -> dict:
        return {"field": self.field}


def contestants(agents: list, deployments: list) -> list[tuple[str, object | None]]:
    """The matrix's columns: an agent that calls a model once per deployment, any other agent once."""
    return [(agent.name, dep) for agent in agents for dep in (deployments if agent.uses_model else [None])]


@debt_gate("a job's trials")
def create_job(
    project,
    user,
    *,
    version,
    agents,
    deployments=(),
    tasks=(),
    attempts=1,
    budget_cents,
    runtime="auto",
    deny_hosts=(),
    name="",
    agent_commands=None,
    purpose=Job.Purpose.JOB,
) -> Job:
    """A job with every trial queued, sent to the hosts after commit; JobError names what is wrong, nothing stored."""
    refuse_if_in_debt(project)
    agents = list(dict.fromkeys(agents))
    if not agents:
        raise JobError("agents", "Name at least one agent.")
    if too_long := [a for a in agents if len(a) > 50]:
        raise JobError("agents", f"An agent's name is at most 50 characters: {too_long[0][:60]!r}.")
    agent_commands = {k: v for k, v in (agent_commands or {}).items() if k in agents}
    if any(len(command) > MAX_COMMAND for command in agent_commands.values()):
        raise JobError("agent_commands", f"An agent's command is at most {MAX_COMMAND} characters.")
    if unknown := [a for a in agents if a not in AGENTS and not a.startswith(("pip:", "npm:"))]:
        raise JobError("agents", f"No agent named {', '.join(unknown)}; {THE_AGENTS}")
    try:
        resolved = [resolve(name, agent_commands) for name in agents]
    except AgentSpecError as exc:
        raise JobError("agents", str(exc)) from None
    deployments = list(deployments)
    if any(agent.uses_model for agent in resolved):
        if not deployments:
            raise JobError("deployments", "An agent that calls a model needs at least one deployment.")
        if completions := [d.name for d in deployments if d.api_style != "chat"]:
            raise JobError("deployments", f"The agents call models with tools over chat completions; {', '.join(completions)} serve plain completions.")
    if not 1 <= attempts <= MAX_ATTEMPTS:
        raise JobError("attempts", f"Attempts must be 1 to {MAX_ATTEMPTS}.")
    deny_hosts = sorted({h.strip().lower() for h in deny_hosts if h.strip()})
    if len(deny_hosts) > MAX_DENY_HOSTS or any(len(h) > 253 for h in deny_hosts):
        raise JobError("deny_hosts", f"At most {MAX_DENY_HOSTS} hosts of at most 253 characters each.")
    if len(tasks) > settings.JOB_MAX_TRIALS:
        raise JobError("tasks", f"At most {settings.JOB_MAX_TRIALS} task names.")
    if runtime not in RUNTIMES:
        raise JobError("runtime", f"The runtime is one of {', '.join(RUNTIMES)}.")
    chosen = list(AgentTask.objects.without_files().filter(version=version))
    if tasks:
        by_name = {t.name: t for t in chosen}
        if missing := [name for name in tasks if name not in by_name]:
            raise JobError("tasks", f"Version {version.number} of {version.task_set.name} has no task {', '.join(missing[:5])}.")
        chosen = [by_name[name] for name in dict.fromkeys(tasks)]
    if "oracle" in agents and (unsolved := [t.name for t in chosen if not t.has_solution]):
        raise JobError("agents", f"The oracle runs a task's solution/solve.sh, which {', '.join(unsolved[:5])} lack.")
    for task in chosen:
        # Read at import (AgentTask.environment): no task's files are loaded for the check.
        if refused := task.environment.get("refused"):
            raise JobError("tasks", f"{task.name}: {refused}")
        # A worker's task is stopped past the queue's timeout: a trial that could outlive it would be cut short.
        if (needed := seconds_needed(task)) > settings.Q_TASK_TIMEOUT:
            raise JobError(
                "tasks",
                f"{task.name}: its build, agent and verifier limits add up to {needed:.0f} s with the platform's margins; a trial may take at most {settings.Q_TASK_TIMEOUT} s here.",
            )
    columns = contestants(resolved, deployments)
    count = len(chosen) * len(columns) * attempts
    if count > settings.JOB_MAX_TRIALS:
        raise JobError("attempts", f"That is {count} trials; a job holds at most {settings.JOB_MAX_TRIALS}.")
    price = settings.TRIAL_PRICE_CENTS
    if budget_cents < price:
        raise JobError("budget", f"A budget of {budget_cents}¢ covers no trial: each is charged {price}¢ at its start.")
    with transaction.atomic():
        job = Job.objects.create(
            project=project,
            name=name.strip()[:100],
            version=version,
            agents=agents,
            tasks=[t.name for t in chosen] if tasks else [],
            attempts=attempts,
            budget_cents=budget_cents,
            runtime=runtime,
            deny_hosts=deny_hosts,
            agent_commands=agent_commands,
            purpose=purpose,
            created_by=user,
        )
        job.deployments.set(deployments)
        Trial.objects.bulk_create(
            Trial(job=job, task=task, agent=agent, deployment=dep, attempt=attempt, status=Trial.Status.QUEUED)
            for attempt in range(1, attempts + 1)
            for task in chosen
            for agent, dep in columns
        )
        transaction.on_commit(lambda: advance(job.pk))
    return job


def advance(job_id: int) -> int:
    """Send the job's next trials, as many as the hosts have free places for; how many were sent."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id, status=Job.Status.RUNNING).first()
        if job is None:
            return 0
        if not job.trials.exclude(status__in=Trial.ENDED).exists():
            Job.objects.filter(pk=job.pk).update(**outcome(job), finished_at=timezone.now())
            return 0
        # Sent and not yet started hold no lease, but will: they count against the room.
        room = free_places(ComputeType.CPU) - Trial.objects.filter(status=Trial.Status.QUEUED, sent_at__isnull=False).count()
        waiting = job.trials.filter(status=Trial.Status.QUEUED, sent_at__isnull=True).order_by("pk")
        sent = list(waiting.values_list("pk", flat=True)[: max(room, 0)])
        Trial.objects.filter(pk__in=sent).update(sent_at=timezone.now())
        transaction.on_commit(lambda: [enqueue(pk) for pk in sent])
    return len(sent)


def outcome(job: Job) -> dict:
    """How a job whose trials all ended ends: `finished`, or `failed` where the trials that ran errored past the share
    a job may lose (belvedir/error_share.py) or none ran at all. Each slot (task, contestant, attempt) counts once, by
    its latest trial: a trial retried to success is not an error."""
    latest: dict[tuple, tuple[str, str]] = {}
    for *slot, status, error in job.trials.order_by("pk").values_list("task_id", "agent", "deployment_id", "attempt", "status", "error"):
        latest[tuple(slot)] = (status, error)
    ran = [(status, error) for status, error in latest.values() if status != Trial.Status.SKIPPED]
    errors = [error for status, error in ran if status == Trial.Status.ERRORED]
    if not ran:
        first = next((error for _, error in latest.values() if error), "")
        return dict(status=Job.Status.FAILED, status_message=f"None of its {len(latest)} trials ran: {first[:300]}")
    if error_share.too_many(len(errors), len(ran)):
        message = (
            f"{len(errors)} of its {len(ran)} trials errored ({error_share.allowance(len(errors), len(ran))}): its rewards, of the "
            f"trials that ran, are not the task set's. The first error: {errors[0][:300]} Retry the errored trials once the cause is fixed."
        )
        return dict(status=Job.Status.FAILED, status_message=message)
    return dict(status=Job.Status.FINISHED, status_message="")


def advance_all() -> int:
    """Scheduled: every running job's next trials (a host freed by a run, not a trial, tells no job)."""
    return sum(advance(pk) for pk in Job.objects.filter(status=Job.Status.RUNNING).values_list("pk", flat=True))


def enqueue(trial_id: int):
    async_task("agent_tasks.jobs.run_job_trial", trial_id, task_name=f"trial-{trial_id}")


@debt_gate("a job's trials, each charged at its start")
def run_job_trial(trial_id: int):
    """The queue's task: claim and charge the trial, run it, settle its money and send the job's next.

    In debt (or short of funds) the trial is skipped with the reason, nothing charged."""
    trial = claim(trial_id)
    if trial is not None:
        try:
            execute(trial, resolve(trial.agent, trial.job.agent_commands), runtime_wanted=trial.job.runtime)
        except NoCapacity:
            # A run took the place meanwhile: the trial waits its turn again, its charge kept for it (a cancel now
            # gives it back: billing.workloads.cancel).
            Trial.objects.filter(pk=trial.pk, status=Trial.Status.RUNNING).update(status=Trial.Status.QUEUED, sent_at=None, started_at=None)
    job_id = Trial.objects.filter(pk=trial_id).values_list("job_id", flat=True).first()
    if job_id:
        advance(job_id)


def claim(trial_id: int) -> Trial | None:
    """The trial, `running` and charged (once, however often it is claimed); None when it is not to run."""
    with transaction.atomic():
        trial = Trial.objects.select_related("job", "task").filter(pk=trial_id).first()
        if trial is None or trial.job is None:
            return None
        job = Job.objects.select_for_update().get(pk=trial.job_id)
        trial = Trial.objects.select_for_update().select_related("task").get(pk=trial_id)
        if trial.status != Trial.Status.QUEUED:
            return None  # a second message for a trial already claimed
        reason = _why_not(job, trial)
        if reason:
            Trial.objects.filter(pk=trial.pk).update(status=Trial.Status.SKIPPED, error=reason, finished_at=timezone.now())
            return None
        Trial.objects.filter(pk=trial.pk).update(status=Trial.Status.RUNNING, started_at=timezone.now(), deadline_at=deadline_for(trial.task))
    trial.refresh_from_db()
    trial.job = job
    return trial


def _why_not(job: Job, trial: Trial) -> str:
    """Why a claimed trial is skipped, or "" once it is charged (inside the claim's transaction, the job locked)."""
    if job.status == Job.Status.CANCELLED:
        return "The job was cancelled before this trial started."
    if trial.price_cents:
        return ""  # charged when first claimed; it waited for a host since
    if trial.deployment_id is None and resolve(trial.agent, job.agent_commands).uses_model:
        return "Its deployment was deleted before the trial started; nothing ran, nothing was charged."
    price = settings.TRIAL_PRICE_CENTS
    if job.charged_cents + price > job.budget_cents:
        return f"The job's budget (${job.budget_cents / 100:.2f}) is spent: this trial would be charged {price}¢ more."
    try:
        charge_trial(job, trial, price)
    except InsufficientBalance as exc:
        return f"Not started: {exc}"
    return ""


def charge_trial(job: Job, trial: Trial, price: int):
    """The trial's charge on the ledger and the job's tally, in the caller's transaction (the job locked).

    InsufficientBalance, nothing charged, when the balance cannot pay it or the project is in debt."""
    trial.job = job
    workloads.charge(TRIALS, trial, price, memo=f"Trial #{trial.pk} of job #{job.pk}", user=job.created_by)


# A slot (task, contestant, attempt) is tried at most this many times again: an agent that errors its trial every
# time (a trajectory the platform cannot read, a task that never builds) would otherwise be paid for without end.
MAX_RETRIES = 3


def retry_errors(job: Job) -> int:
    """Each errored trial of the job tried again as a new trial of the same slot (task, contestant, attempt),
    charged at its start like any other (an errored trial keeps its row, its error and its refund), unless its slot
    was tried MAX_RETRIES times again already; how many."""
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.status == Job.Status.CANCELLED:
            return 0
        slots: dict[tuple, list[Trial]] = {}
        for trial in locked.trials.order_by("pk"):
            slots.setdefault((trial.task_id, trial.agent, trial.deployment_id, trial.attempt), []).append(trial)
        again = [tried[-1] for tried in slots.values() if tried[-1].status == Trial.Status.ERRORED and len(tried) <= MAX_RETRIES]
        Trial.objects.bulk_create(
            Trial(job=locked, task_id=t.task_id, agent=t.agent, deployment_id=t.deployment_id, attempt=t.attempt, status=Trial.Status.QUEUED) for t in again
        )
        if again:
            Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING, status_message="", finished_at=None)
            transaction.on_commit(lambda: advance(job.pk))
    return len(again)


def cancel(job: Job) -> int:
    """Stop sending the job's trials; those waiting are skipped (any charged while they waited for a host, refunded),
    those running finish. How many were skipped."""
    reason = "The job was cancelled before this trial started."
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.status != Job.Status.RUNNING:
            return 0
        # First: a trial's end sends the job's next (advance), which a cancelled job no longer does.
        Job.objects.filter(pk=job.pk).update(status=Job.Status.CANCELLED, finished_at=timezone.now())
        waiting = locked.trials.filter(status=Trial.Status.QUEUED)
        # Never charged: skipped in one statement. Charged (claimed, then put back to wait for a host): each through
        # the lifecycle, which gives its charge back with its end.
        skipped = waiting.filter(price_cents=0).update(status=Trial.Status.SKIPPED, error=reason, finished_at=timezone.now())
        skipped += sum(workloads.cancel(TRIALS, trial, reason) for trial in waiting.filter(price_cents__gt=0))
    return skipped


def progress(job: Job) -> dict:
    """Counts by status, for the page's bar, the API and the CLI: counted with the job where it came `with_progress`."""
    if hasattr(job, "progress_total"):
        counts = {name: getattr(job, f"progress_{name}") for name in ("total", *Trial.Status.values)}
    else:
        counts = job.trials.aggregate(**_counts(""))
    counts["ended"] = sum(counts[s] for s in Trial.ENDED)
    return counts


def with_progress(queryset):
    """Jobs with their trials counted by status in the same query: a list of jobs asks no query per job.

    Ordered again: Django leaves a model's Meta.ordering out of a query that groups, as this one does."""
    counted = queryset.annotate(**{f"progress_{name}": count for name, count in _counts("trials").items()})
    return counted.order_by(*(queryset.query.order_by or Job._meta.ordering))


def _counts(to_trials: str) -> dict:
    """Trials counted in all and by status; `to_trials`, the path from the model queried to them ("" from trials)."""
    field, status = (to_trials, f"{to_trials}__status") if to_trials else ("pk", "status")
    return {"total": Count(field), **{name: Count(field, filter=Q(**{status: name})) for name in Trial.Status.values}}
