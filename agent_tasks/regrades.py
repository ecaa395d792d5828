"""A regrade: a job's trials graded again by another version's tests, from the outputs they kept, with no agent run.

When a task's tests change (a verifier found too lenient, a test that was wrong), Terminal-Bench's rules say results
can be regraded rather than run again. Here each trial whose task declares its outputs kept them (outputs.py); a
regrade puts them in a fresh sandbox of the new version's task and runs its tests there, sealed (trials.seal and
trials.verify, the sealed verifier's own path), each trial keeping its old reward beside the new one.

Which trials: the newest of each slot that succeeded, whose task is in the new version, changed there in its tests or
verifier settings only, or not at all (versions.py: a changed environment, instruction or agent settings makes it
another task, whose agents must run again), and that kept its outputs. The others are listed as skipped, saying why.

Each grade is a paid workload (billing/workloads.py, the kind "grade"): charged BELVEDIR_GRADE_PRICE_CENTS when a
worker claims it, refunded when the platform fails it, reaped past its deadline. Grades are sent as hosts have room,
as a job's trials are.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django_q.tasks import async_task

from belvedir.sandbox.errors import NoCapacity
from belvedir.sandbox.launch import Placement, workload
from belvedir.sandbox.models import ComputeType
from belvedir.sandbox.output import clean_output
from belvedir.sandbox.owners import Owner
from belvedir.sandbox.scheduler import free_places
from belvedir.sandbox.spec import SandboxSpec
from billing import workloads
from billing.actions import debt_gate, refuse_if_in_debt
from billing.errors import InsufficientBalance
from evals.comparison import paired_statistics

from . import environment, outputs, trials, versions
from .models import Grade, Job, Regrade, Trial

logger = logging.getLogger(__name__)

OWNER_KIND = "grade"
OUTPUT_TAIL = 4096


class RegradeRefused(ValueError):
    """A regrade that cannot be made as asked: the message says why (a 400)."""

    status_code = 400


@debt_gate("a regrade's grades, each charged at its start")
def start(job: Job, version, user) -> Regrade:
    """The regrade, its grades queued (or skipped, saying why) and sent after commit; RegradeRefused when it cannot be."""
    refuse_if_in_debt(job.project)
    if version.task_set_id != job.version.task_set_id:
        raise RegradeRefused(f"Version {version.number} is of another task set than the job's ({job.version.task_set.name}).")
    new_tasks = {t.name: t for t in version.tasks.defer("archive")}
    newest: dict[tuple, Trial] = {}
    for trial in job.trials.select_related("task").defer("task__archive").order_by("pk"):
        newest[(trial.task_id, trial.agent, trial.deployment_id, trial.attempt)] = trial
    kept = set(Trial.objects.filter(pk__in=[t.pk for t in newest.values()], outputs__isnull=False).values_list("pk", flat=True))
    grades = [_planned(trial, new_tasks.get(trial.task.name), trial.pk in kept) for trial in newest.values()]
    if not any(g.status == Grade.Status.QUEUED for g in grades):
        reasons = sorted({g.error for g in grades}) or ["The job has no trials."]
        raise RegradeRefused(f"No trial of job #{job.pk} can be graded again by version {version.number}: {' '.join(reasons[:3])}")
    with transaction.atomic():
        regrade = Regrade.objects.create(job=job, version=version, created_by=user)
        for grade in grades:
            grade.regrade = regrade
        Grade.objects.bulk_create(grades)
        transaction.on_commit(lambda: advance(regrade.pk))
    return regrade


def _planned(trial: Trial, task, kept: bool) -> Grade:
    grade = Grade(trial=trial, task=task)
    if task is None:
        reason = f"Its task {trial.task.name} is not in the new version."
    elif trial.status != Trial.Status.SUCCEEDED:
        reason = f"It {trial.status}: there is no reward to compare."
    else:
        change, parts = versions.change(trial.task.parts, task.parts)
        reason = f"Its task's {', '.join(parts)} changed: its agents must run it again." if change == versions.RERUN else ""
        if not reason and not kept:
            reason = "It kept no outputs: its task declares none ([verifier] outputs)." if not outputs.declared(trial.task.config) else "It kept no outputs."
    if reason:
        grade.status, grade.error, grade.finished_at = Grade.Status.SKIPPED, reason, timezone.now()
    return grade


def advance(regrade_id: int) -> int:
    """Send the regrade's next grades, as many as the hosts have free places for; how many were sent."""
    with transaction.atomic():
        regrade = Regrade.objects.select_for_update().filter(pk=regrade_id, status=Regrade.Status.RUNNING).first()
        if regrade is None:
            return 0
        if not regrade.grades.exclude(status__in=Grade.ENDED).exists():
            Regrade.objects.filter(pk=regrade.pk).update(status=Regrade.Status.FINISHED, finished_at=timezone.now())
            return 0
        room = free_places(ComputeType.CPU) - Grade.objects.filter(status=Grade.Status.QUEUED, sent_at__isnull=False).count()
        sent = list(regrade.grades.filter(status=Grade.Status.QUEUED, sent_at__isnull=True).order_by("pk").values_list("pk", flat=True)[: max(room, 0)])
        Grade.objects.filter(pk__in=sent).update(sent_at=timezone.now())
        transaction.on_commit(lambda: [async_task("agent_tasks.regrades.run_grade", pk, task_name=f"grade-{pk}") for pk in sent])
    return len(sent)


def advance_all() -> int:
    """Scheduled: every running regrade's next grades."""
    return sum(advance(pk) for pk in Regrade.objects.filter(status=Regrade.Status.RUNNING).values_list("pk", flat=True))


@debt_gate("a regrade's grades, each charged at its start")
def run_grade(grade_id: int):
    """The queue's task: claim and charge the grade, grade it, and send the regrade's next."""
    grade = claim(grade_id)
    if grade is not None:
        try:
            execute(grade)
        except NoCapacity:
            Grade.objects.filter(pk=grade.pk, status=Grade.Status.RUNNING).update(status=Grade.Status.QUEUED, sent_at=None, started_at=None)
    regrade_id = Grade.objects.filter(pk=grade_id).values_list("regrade_id", flat=True).first()
    if regrade_id:
        advance(regrade_id)


def claim(grade_id: int) -> Grade | None:
    """The grade, `running` and charged (once); None when it is not to run (a second message, a cancel, no money)."""
    with transaction.atomic():
        grade = Grade.objects.select_related("regrade").filter(pk=grade_id).first()
        if grade is None:
            return None
        regrade = Regrade.objects.select_for_update().get(pk=grade.regrade_id)
        grade = Grade.objects.select_for_update().get(pk=grade_id)
        if grade.status != Grade.Status.QUEUED:
            return None
        reason = "The regrade was cancelled before this grade started." if regrade.status == Regrade.Status.CANCELLED else ""
        if not reason and not grade.price_cents:
            grade.regrade = regrade
            try:
                workloads.charge(GRADES, grade, settings.GRADE_PRICE_CENTS, memo=f"Grade #{grade.pk} of regrade #{regrade.pk}", user=regrade.created_by)
            except InsufficientBalance as exc:
                reason = f"Not started: {exc}"
        if reason:
            Grade.objects.filter(pk=grade.pk).update(status=Grade.Status.SKIPPED, error=reason, finished_at=timezone.now())
            return None
        Grade.objects.filter(pk=grade.pk).update(status=Grade.Status.RUNNING, started_at=timezone.now(), deadline_at=_deadline(grade))
    return Grade.objects.select_related("regrade", "trial__task", "task").get(pk=grade_id)


def _deadline(grade: Grade):
    task = grade.task
    building = min(task.build_timeout_sec, settings.SANDBOX_BUILD_MAX_SECONDS)
    return timezone.now() + timedelta(seconds=building + task.verifier_timeout_sec + trials.SETUP_SECONDS)


def execute(grade: Grade):
    """The trial's kept outputs in a fresh sandbox of the new task, graded there; the grade ended with what happened.
    NoCapacity, before anything ran, when no host has room."""
    task, old = grade.task, grade.trial.task
    fields = {}
    try:
        env = environment.resolve(task.files("environment"))
        declared = outputs.declared(old.config)
        kept = outputs.Outputs.from_archive(bytes(grade.trial.outputs.archive), declared)
        limits, _ = trials.task_limits(task)
        owner = Owner(OWNER_KIND, grade.pk)

        def spec_for(place: Placement) -> SandboxSpec:
            return SandboxSpec(
                owner=owner,
                image=env.image,
                recipe=env.recipe(task.build_timeout_sec),
                limits=limits,
                network="none",
                runtime=place.runtime if grade.regrade.job.runtime == "auto" else grade.regrade.job.runtime,
                workdir=env.workdir,
                writable=trials.grading_folders(env),
            )

        with workload(owner, spec_for) as box:
            fields["runtime"] = box.runtime
            trials.seal(box, env, declared, kept)
            verdict = trials.verify(box, task, env)
        fields.update(reward=verdict.reward, verifier_exit=verdict.exit_code, verifier_seconds=verdict.seconds, graded_digest=kept.digest)
        fields["verifier_output"] = clean_output(verdict.output, OUTPUT_TAIL)
        status = Grade.Status.SUCCEEDED
    except NoCapacity:
        raise
    except environment.EnvironmentRefused as exc:
        status, fields["error"] = Grade.Status.ERRORED, clean_output(str(exc), 2000)
    except Exception as exc:
        error, fault = trials.failure(exc, "grade", grade.pk)
        status, fields["error"], fields["platform_fault"] = Grade.Status.ERRORED, clean_output(error, 2000), fault
    workloads.end(GRADES, grade, status, refund_reason=fields.get("error", "") if fields.get("platform_fault") else "", **fields)


def cancel(regrade: Regrade) -> int:
    """Stop sending its grades; those waiting are skipped (any charged, refunded), those running finish. How many."""
    reason = "The regrade was cancelled before this grade started."
    with transaction.atomic():
        locked = Regrade.objects.select_for_update().get(pk=regrade.pk)
        if locked.status != Regrade.Status.RUNNING:
            return 0
        Regrade.objects.filter(pk=regrade.pk).update(status=Regrade.Status.CANCELLED, finished_at=timezone.now())
        waiting = locked.grades.filter(status=Grade.Status.QUEUED)
        skipped = waiting.filter(price_cents=0).update(status=Grade.Status.SKIPPED, error=reason, finished_at=timezone.now())
        return skipped + sum(workloads.cancel(GRADES, grade, reason) for grade in waiting.filter(price_cents__gt=0))


def comparison(regrade: Regrade) -> dict:
    """Each graded trial's old reward against its new one, paired as jobs compare: the delta with its interval, the
    test, the verdict; the trials whose reward moved; and how many were graded, skipped, errored or still waiting."""
    grades = list(regrade.grades.select_related("trial__task", "trial__deployment").order_by("pk"))
    graded = [g for g in grades if g.status == Grade.Status.SUCCEEDED]
    found = paired_statistics([g.trial.reward for g in graded], [g.reward for g in graded])
    moved = [
        {"trial": g.trial_id, "task": g.trial.task.name, "contestant": g.trial.contestant, "attempt": g.trial.attempt, "old": g.trial.reward, "new": g.reward}
        for g in graded
        if g.reward != g.trial.reward
    ]
    counts = {status: sum(g.status == status for g in grades) for status in Grade.Status.values}
    return {"n": len(graded), **found, "moved": moved, "counts": counts}


def _tally(grade: Grade, cents: int):
    Regrade.objects.filter(pk=grade.regrade_id).update(charged_cents=F("charged_cents") + cents)


def _advance(grade: Grade):
    advance(grade.regrade_id)


GRADES = workloads.PaidKind(
    name=OWNER_KIND,
    model=Grade,
    waiting=(Grade.Status.QUEUED,),
    running=(Grade.Status.RUNNING,),
    errored=Grade.Status.ERRORED,
    cancelled=Grade.Status.SKIPPED,
    message_field="error",
    fault_flag="platform_fault",
    faulted=Q(status=Grade.Status.ERRORED, platform_fault=True),
    project=lambda grade: grade.regrade.job.project,
    stale=lambda: Grade.objects.filter(deadline_at__lt=timezone.now()),
    on_money=_tally,
    after_end=_advance,
    cancel_stops=False,
)
