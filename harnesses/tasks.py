"""Queue entry points (django-q2): run a harness; send again runs whose message a killed worker took.

Runs whose worker died are ended by the paid workloads' reaper (billing.workloads, through the kind RUNS
registered in apps.py); their leases and containers by belvedir.sandbox.reaper in the same pass.
"""

from django.conf import settings

from belvedir.core.requeue import requeue_waiting

from .actions import enqueue_run
from .execution import execute_run  # noqa: F401  (the task django-q2 calls by name)
from .models import Run


def requeue_lost_runs() -> int:
    """Scheduled: runs queued for REQUEUE_AFTER_SECONDS whose message a killed worker took are sent again.

    A run it had already claimed is not among them: that one stopped
    heartbeating and the reaper ends it `error`, refunded. It is never
    started a second time, since its sandbox may have done part of the work.
    """
    return requeue_waiting(Run.objects.filter(status=Run.Status.QUEUED), settings.RUN_QUEUE, enqueue_run)
