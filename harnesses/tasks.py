"""Queue entry points (django-q2): run a harness; end runs whose worker died.

The reaper itself (leases and containers of every kind of workload) is
belvedir.sandbox.reaper; it calls `reap_stale_runs` through the owner kind
registered in apps.py.
"""

from django.conf import settings
from django.utils import timezone

from belvedir.core.requeue import requeue_waiting

from .actions import enqueue_run, finish_run
from .execution import execute_run  # noqa: F401  (the task django-q2 calls by name)
from .models import Run

REAP_BATCH = 100


def reap_stale_runs() -> int:
    """End `error`, refunded, the runs whose worker stopped sending heartbeats.

    Bounded: at most REAP_BATCH runs a call; the schedule calls again. Their
    leases and containers go in the same reaper pass, once they are ended.
    """
    stale_before = timezone.now() - timezone.timedelta(seconds=settings.HARNESS_STALE_SECONDS)
    stale = Run.objects.filter(status__in=Run.IN_SANDBOX, heartbeat_at__lt=stale_before)[:REAP_BATCH]
    return sum(
        finish_run(
            run,
            Run.Status.ERROR,
            status_message="The worker running this run stopped; the run was refunded.",
            refund_reason="worker died",
            from_statuses=Run.IN_SANDBOX,
        )
        for run in stale
    )


def requeue_lost_runs() -> int:
    """Scheduled: runs queued for REQUEUE_AFTER_SECONDS whose message a killed worker took are sent again.

    A run it had already claimed is not among them: that one stopped
    heartbeating and the reaper ends it `error`, refunded. It is never
    started a second time, since its sandbox may have done part of the work.
    """
    return requeue_waiting(Run.objects.filter(status=Run.Status.QUEUED), settings.RUN_QUEUE, enqueue_run)
