"""One reaper for every kind of sandbox workload: what a dead worker left behind goes.

Scheduled every minute ("reap sandbox workloads") and run by `manage.py
reap_workloads` before workers start. For each registered owner kind it
first lets the kind end its owners whose worker died (runs end `error`,
refunded; evals resume), then deletes the leases and removes the
`bv-<kind>-<id>` containers of owners no longer active. A worker never has
to clean up after itself for its place and container to come back.
"""

import logging

from . import docker, owners
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
            containers = [c for c in docker.managed_containers(host.engine) if c["owner_kind"] in by_kind]
        except SandboxPlatformError as exc:
            logger.warning("reaper cannot reach %s: %s", host.name, exc.message)
            continue
        orphans = []
        for kind in by_kind.values():
            mine = [c for c in containers if c["owner_kind"] == kind.kind]
            alive = owners.active_ids(kind, {c["owner_id"] or "" for c in mine})
            orphans += [c for c in mine if c["owner_id"] not in alive]
        for container in orphans[:CONTAINER_BATCH]:
            try:
                docker.remove_container(host.engine, container["name"])
                removed += 1
            except SandboxPlatformError as exc:
                logger.warning("could not remove %s on %s: %s", container["name"], host.name, exc.message)
    return removed
