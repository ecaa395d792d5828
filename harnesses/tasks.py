"""Queue entry points (django-q2): run a harness, reap what dead workers left."""

import logging

from django.conf import settings
from django.utils import timezone

from belvedir.core.requeue import requeue_waiting
from belvedir.sandbox import docker as sandbox_docker
from belvedir.sandbox import scheduler
from belvedir.sandbox.errors import SandboxPlatformError
from belvedir.sandbox.models import SandboxHost, SandboxLease

from .actions import enqueue_run, finish_run
from .execution import execute_run  # noqa: F401  (the task django-q2 calls by name)
from .models import Run

logger = logging.getLogger(__name__)
REAP_BATCH = 100


def reap_runs() -> dict:
    """Finish runs whose worker died, and remove containers nobody owns.

    Bounded: at most REAP_BATCH runs a call; the schedule calls again.
    """
    stale_before = timezone.now() - timezone.timedelta(seconds=settings.HARNESS_STALE_SECONDS)
    stale = list(Run.objects.filter(status__in=Run.IN_SANDBOX, heartbeat_at__lt=stale_before).select_related("host")[:REAP_BATCH])
    reaped = 0
    for run in stale:
        if finish_run(
            run,
            Run.Status.ERROR,
            status_message="The worker running this run stopped; the run was refunded.",
            refund_reason="worker died",
            from_statuses=Run.IN_SANDBOX,
        ):
            reaped += 1
        if run.host:
            _remove_quietly(run.host.engine, f"bv-run-{run.pk}")
        scheduler.release(run.lease_owner)
    # Leases of runs that ended (a worker killed between finishing and releasing).
    ended = [lease.owner for lease in SandboxLease.objects.filter(owner__startswith="run:")[:1000]]
    active = {f"run:{pk}" for pk in Run.objects.active().filter(pk__in=[o.split(":")[1] for o in ended]).values_list("pk", flat=True)}
    SandboxLease.objects.filter(owner__in=set(ended) - active).delete()
    orphans = _remove_orphan_containers()
    return {"reaped": reaped, "orphans_removed": orphans}


def requeue_lost_runs() -> int:
    """Scheduled: runs queued for REQUEUE_AFTER_SECONDS whose message a killed worker took are sent again.

    A run it had already claimed is not among them: that one stopped
    heartbeating and reap_runs ends it `error`, refunded. It is never
    started a second time, since its sandbox may have done part of the work.
    """
    return requeue_waiting(Run.objects.filter(status=Run.Status.QUEUED), settings.RUN_QUEUE, enqueue_run)


def _remove_orphan_containers() -> int:
    removed = 0
    # A silent engine would hold the reaper for a whole API timeout; its orphans go once it answers again.
    for host in SandboxHost.objects.filter(enabled=True, healthy=True):
        try:
            containers = sandbox_docker.managed_containers(host.engine, "run")
        except SandboxPlatformError as exc:
            logger.warning("reaper cannot reach %s: %s", host.name, exc.message)
            continue
        ids = [c["owner_id"] for c in containers if (c["owner_id"] or "").isdigit()]
        active = {str(pk) for pk in Run.objects.active().filter(pk__in=ids).values_list("pk", flat=True)}
        for container in containers[:REAP_BATCH]:
            if container["owner_id"] not in active:
                _remove_quietly(host.engine, container["name"])
                removed += 1
    return removed


def _remove_quietly(engine, name):
    try:
        sandbox_docker.remove_container(engine, name)
    except SandboxPlatformError as exc:
        logger.warning("could not remove %s: %s", name, exc.message)
