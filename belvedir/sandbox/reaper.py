"""One reaper for every kind of sandbox workload: what a dead worker left behind goes.

Scheduled every minute ("reap sandbox workloads") and run by `manage.py
reap_workloads` before workers start. For each registered owner kind it
first lets the kind end its owners whose worker died (runs end `error`,
refunded; evals resume), then deletes the leases and, through each host's
backend, removes the `bv-<kind>-<id>` sandboxes of owners no longer active. A worker never has
to clean up after itself for its place and container to come back.
"""

import logging

from . import backends, owners
from .errors import SandboxPlatformError
from .models import SandboxHost, SandboxLease
from .owners import Owner, OwnerKind

logger = logging.getLogger(__name__)
# Bounds on one call; the schedule comes back every minute for the rest.
LEASE_BATCH = 1000
CONTAINER_BATCH = 100


def reap() -> dict:
    kinds = owners.registered()
    reaped = {kind.kind: kind.reap_stale() for kind in kinds if kind.reap_stale}
    released = sum(_release_leases(kind) for kind in kinds)
    return {"reaped": reaped, "leases_released": released, "orphans_removed": _remove_orphan_containers(kinds)}


def _release_leases(kind: OwnerKind) -> int:
    held = [Owner.parse(o) for o in SandboxLease.objects.filter(owner__startswith=f"{kind.kind}:").values_list("owner", flat=True)[:LEASE_BATCH]]
    alive = owners.active_ids(kind, {o.id for o in held})
    ended = [str(o) for o in held if o.id not in alive]
    return SandboxLease.objects.filter(owner__in=ended).delete()[0] if ended else 0


def _remove_orphan_containers(kinds: list[OwnerKind]) -> int:
    by_kind = {kind.kind: kind for kind in kinds}
    removed = 0
    # A silent engine would hold the reaper for a whole API timeout; its orphans go once it answers again.
    for host in SandboxHost.objects.filter(enabled=True, healthy=True):
        try:
            backend = backends.for_host(host)
            sandboxes = [s for s in backend.managed() if s.owner_kind in by_kind]
        except SandboxPlatformError as exc:
            logger.warning("reaper cannot reach %s: %s", host.name, exc.message)
            continue
        orphans = []
        for kind in by_kind.values():
            mine = [s for s in sandboxes if s.owner_kind == kind.kind]
            alive = owners.active_ids(kind, {s.owner_id or "" for s in mine})
            orphans += [s for s in mine if s.owner_id not in alive]
        for sandbox in orphans[:CONTAINER_BATCH]:
            try:
                backend.remove(sandbox.name)
                removed += 1
            except SandboxPlatformError as exc:
                logger.warning("could not remove %s on %s: %s", sandbox.name, host.name, exc.message)
    return removed
