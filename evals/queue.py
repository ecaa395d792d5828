"""How an eval reaches the eval queue: on its own at once, or a suite's one deployment at a time.

A suite run's evals wait as `pending`; `advance` sends each deployment's
next one once none of that deployment's is queued or running: its cells go in
order, each at the deployment's whole cap (which every eval asking it at once
shares: evals/shares.py), while different deployments run side by side.
"""

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from billing.actions import debt_gate
from billing.models import Account

from .models import Eval, SuiteRun


def enqueue(ev: Eval):
    # Their own queue, worked by their own cluster (Q_CLUSTER_NAME=evals):
    # a flood of evals never delays a paid run.
    async_task("evals.tasks.run_eval", ev.pk, task_name=f"eval-{ev.pk}", cluster=settings.EVAL_QUEUE)


def waiting_status(ev: Eval) -> str:
    """What an eval to be (re)started waits as: pending behind its suite's turn, or queued."""
    return Eval.Status.PENDING if ev.suite_run_id else Eval.Status.QUEUED


def start(ev: Eval):
    """After commit: an eval now waiting is sent to the queue, or its suite moves on."""
    if ev.suite_run_id:
        advance(ev.suite_run_id)
    else:
        enqueue(ev)


@debt_gate("a suite run's next cells")
def advance(suite_run_id: int) -> int:
    """Queue each deployment's next pending eval of the suite run once none of its evals is queued or running; how many.

    None while the suite's project is in debt: its cells wait pending (nothing spent, nothing failed), and the
    scheduled advance_all queues them once the debt is paid."""
    queued = []
    with transaction.atomic():
        # Locked: two evals ending at once must not both queue the same deployment's next.
        suite_run = SuiteRun.objects.select_for_update().filter(pk=suite_run_id).first()
        if suite_run is None or Account.balance_for(suite_run.project_id) < 0:
            return 0
        evals = Eval.objects.filter(suite_run_id=suite_run_id)
        busy = set(evals.filter(status__in=[Eval.Status.QUEUED, Eval.Status.RUNNING]).values_list("deployment_id", flat=True))
        waiting = set(evals.filter(status=Eval.Status.PENDING).values_list("deployment_id", flat=True))
        for deployment_id in sorted(waiting - busy):
            nxt = evals.filter(status=Eval.Status.PENDING, deployment_id=deployment_id).order_by("pk").first()
            if Eval.objects.filter(pk=nxt.pk, status=Eval.Status.PENDING).update(status=Eval.Status.QUEUED, queued_at=timezone.now()):
                queued.append(nxt)
        transaction.on_commit(lambda: [enqueue(ev) for ev in queued])
    return len(queued)
