"""Deleting a project: its work in every app goes, its money's history stays."""

from django.db import transaction

from agent_tasks.models import Job, Trial
from belvedir.core.errors import TeamError
from belvedir.core.models import Project
from billing.actions import detach_account
from evals.models import Eval
from harnesses.models import Run
from traces.batches import lock_out
from traces.models import Span


@transaction.atomic
def delete_project(project: Project, *, forfeit_cents: int = 0):
    """The project's work goes with it; its money's history does not.

    Refused while something still runs in a sandbox. The account, with its
    ledger, top-ups and coupon redemptions, is detached and kept (a ledger is
    never deleted, and Stripe may still refund or dispute a top-up later);
    deleting is refused while the account is in debt, and a positive balance
    is forfeited only when it equals `forfeit_cents`, the amount the person
    deleting was shown.
    """

    lock_out(project)
    if (
        Run.objects.filter(project=project, status__in=Run.ACTIVE).exists()
        or Eval.objects.filter(project=project, status__in=Eval.ACTIVE).exists()
        or Trial.objects.filter(job__project=project, status=Trial.Status.RUNNING).exists()
    ):
        raise TeamError("Runs, evaluations or job trials are still in progress: cancel them first.", 409)
    detach_account(project, forfeit_cents=forfeit_cents)
    # PROTECT keeps these from going by accident (an eval its deployment);
    # deleting the whole project is the one deliberate time they go, children first.
    # Spans first, in one DELETE: nothing points at a span, while the
    # cascade from tasks would otherwise load each task to null its spans.
    Span.objects.filter(project=project).delete()
    Eval.objects.filter(project=project).delete()
    Job.objects.filter(project=project).delete()  # before their task set versions, which they PROTECT
    project.delete()
