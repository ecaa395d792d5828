from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count

from .errors import NoCapacity
from .models import ComputeType, SandboxHost, SandboxLease
from .owners import Owner


def acquire_host(owner: Owner, kind: str = ComputeType.CPU, gpu_type: str = "") -> SandboxLease:
    """Reserve a place on an enabled, healthy host of `kind` with free capacity.

    Candidate hosts are locked for the whole choice so two workers cannot both
    take the last place. The host with the most free places wins, so hosts
    fill in proportion to their capacity. A GPU lease also takes a free GPU
    slot, so two runs never share one GPU.
    """
    existing = SandboxLease.objects.select_related("host").filter(owner=str(owner)).first()
    if existing:
        return existing  # a re-delivered task keeps the place it already has
    with transaction.atomic():
        hosts = list(candidate_hosts(kind, gpu_type).select_for_update().order_by("pk"))
        if not hosts:
            raise NoCapacity(_no_host_message(kind, gpu_type))
        load = dict(SandboxLease.objects.filter(host__in=hosts).values("host").annotate(n=Count("pk")).values_list("host", "n"))
        for host in sorted(hosts, key=lambda h: load.get(h.pk, 0) - h.capacity):
            if load.get(host.pk, 0) >= host.capacity:
                continue
            # A GPU run takes a GPU slot; a CPU run allowed onto a GPU host takes none.
            slot = _free_gpu_slot(host) if kind == ComputeType.GPU else None
            if kind == ComputeType.GPU and slot is None:
                continue
            try:
                with transaction.atomic():
                    return SandboxLease.objects.create(host=host, owner=str(owner), gpu_slot=slot)
            except IntegrityError:
                continue
        raise NoCapacity(f"Every {kind.upper()} sandbox host{_gpu_suffix(gpu_type)} is busy; try again shortly.")


def candidate_hosts(kind: str, gpu_type: str = ""):
    """Enabled, healthy, non-draining hosts that may take a sandbox of this kind."""
    accepting = SandboxHost.objects.filter(enabled=True, draining=False, healthy=True)
    if kind == ComputeType.GPU:
        return accepting.filter(kind=kind, **({"gpu_type": gpu_type} if gpu_type else {}))
    if settings.GPU_HOSTS_TAKE_CPU_RUNS:
        return accepting
    return accepting.filter(kind=ComputeType.CPU)


def free_places(kind: str = ComputeType.CPU) -> int:
    """How many more workloads of `kind` the accepting hosts have room for now (a job sends that many trials)."""
    hosts = candidate_hosts(kind).annotate(used=Count("leases"))
    return sum(max(0, host.capacity - host.used) for host in hosts)


def check_gpu_available(gpu_type: str):
    """Before charging a GPU run: NoCapacity when no such GPU is free right now."""
    hosts = list(candidate_hosts(ComputeType.GPU, gpu_type))
    if not hosts:
        raise NoCapacity(_no_host_message(ComputeType.GPU, gpu_type))
    if not any(_free_gpu_slot(host) is not None for host in hosts):
        raise NoCapacity(f"Every {gpu_type or 'GPU'} GPU is in use; try again when a run finishes.")


def move(lease: SandboxLease, kind: str, gpu_type: str = "") -> SandboxLease:
    """Give up a lease and take a place elsewhere (the old host must no longer be a candidate)."""
    owner = Owner.parse(lease.owner)
    release(owner)
    return acquire_host(owner, kind, gpu_type)


def release(owner: Owner):
    SandboxLease.objects.filter(owner=str(owner)).delete()


def _free_gpu_slot(host: SandboxHost) -> int | None:
    taken = set(SandboxLease.objects.filter(host=host, gpu_slot__isnull=False).values_list("gpu_slot", flat=True))
    return next((slot for slot in range(host.gpu_count) if slot not in taken), None)


def _gpu_suffix(gpu_type):
    return f" with {gpu_type} GPUs" if gpu_type else ""


def _no_host_message(kind, gpu_type):
    return f"No enabled {kind.upper()} sandbox host{_gpu_suffix(gpu_type)} is configured and healthy."
