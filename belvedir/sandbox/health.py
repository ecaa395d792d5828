"""Sandbox host health: ask each engine, schedule nothing on a silent one, end what ran there.

A host is unhealthy when its engine does not answer (or lacks the sandbox
image); the scheduler skips it until a later check finds it answering. When
a check finds an engine silent, the workloads leased on it cannot be reached
any more: each owner kind's registered `host_lost` ends them (runs end
`error` and are refunded). The sandbox package imports no app; apps register
their owner kinds in owners.py.
"""

import logging
import time

from django.conf import settings
from django.utils import timezone

from . import backends, owners
from .errors import BackendUnavailable, SandboxPlatformError
from .models import SandboxHost, SandboxLease
from .owners import Owner

logger = logging.getLogger(__name__)
# A bound on one call: the schedule comes back every minute.
MAX_HOSTS = 200
# One retry a second later, so one dropped connection does not end a host's runs.
ATTEMPTS = 2
RETRY_SECONDS = 1.0


def check_hosts() -> dict:
    """Scheduled every minute, and `manage.py check_hosts`: check every enabled host."""
    healthy, unhealthy = [], []
    for host in SandboxHost.objects.filter(enabled=True).order_by("pk")[:MAX_HOSTS]:
        (healthy if check_host(host) else unhealthy).append(host.name)
    return {"healthy": healthy, "unhealthy": unhealthy}


def check_host(host: SandboxHost) -> bool:
    answering, error = _probe(host)
    now = timezone.now()
    if error is None:
        if not host.healthy:
            logger.info("sandbox host %s answers again", host.name)
        SandboxHost.objects.filter(pk=host.pk).update(healthy=True, last_checked_at=now, last_error="")
        host.healthy, host.last_checked_at, host.last_error = True, now, ""
        return True
    if host.healthy:
        logger.warning("sandbox host %s is unhealthy: %s", host.name, error)
    SandboxHost.objects.filter(pk=host.pk).update(healthy=False, last_checked_at=now, last_error=error[:2000])
    host.healthy, host.last_checked_at, host.last_error = False, now, error[:2000]
    if not answering:
        end_workloads(host)
    return False


def mark_unhealthy(host: SandboxHost, error: str):
    """A launch found the engine silent: take no new sandboxes there until a check finds it answering."""
    logger.warning("sandbox host %s is unhealthy (launch failed): %s", host.name, error)
    SandboxHost.objects.filter(pk=host.pk).update(healthy=False, last_checked_at=timezone.now(), last_error=error[:2000])
    host.healthy = False


def end_workloads(host: SandboxHost) -> int:
    """Hand every lease on the host to its owner kind's handler; kinds without one are left to their own logic."""
    by_kind: dict[str, list[str]] = {}
    for value in SandboxLease.objects.filter(host=host).values_list("owner", flat=True):
        owner = Owner.parse(value)
        by_kind.setdefault(owner.kind, []).append(owner.id)
    ended = 0
    for kind, ids in by_kind.items():
        if (registered := owners.get(kind)) and registered.host_lost:
            registered.host_lost(ids, host)
            ended += len(ids)
    return ended


def _probe(host: SandboxHost) -> tuple[bool, str | None]:
    """(the engine answers, what is wrong or None)."""
    error = ""
    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(RETRY_SECONDS)
        try:
            backends.for_host(host).check(settings.SANDBOX_IMAGE, settings.SANDBOX_HEALTH_TIMEOUT_SECONDS)
            return True, None
        except BackendUnavailable as exc:
            error = exc.message
        except SandboxPlatformError as exc:  # answering, but cannot run sandboxes (the image is missing, the backend not allowed)
            return True, exc.message
    return False, error
