"""A workload's whole life on a sandbox host: lease a place, open the sandbox, release the place.

Apps say what to run (a spec per host) and what to do inside; they never
take or give back a lease themselves. Whatever a worker leaves behind when
it dies (a lease, a container) is the reaper's (reaper.py).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from . import health, scheduler
from .docker import Sandbox
from .errors import DockerUnavailable, NoCapacity
from .models import ComputeType, SandboxLease
from .owners import Owner
from .spec import SandboxSpec

SpecFor = Callable[[SandboxLease], SandboxSpec]


@contextmanager
def workload(
    owner: Owner,
    spec_for: SpecFor,
    *,
    compute: str = ComputeType.CPU,
    gpu_type: str = "",
    on_lease: Callable[[SandboxLease], None] | None = None,
) -> Iterator[Sandbox]:
    """The owner's sandbox, on a host with room for it; the place is given back however the block ends.

    NoCapacity when no host has room. `on_lease` hears of the host chosen,
    and of the next one when the launch moves (see `open_sandbox`).
    """
    try:
        lease = scheduler.acquire_host(owner, compute, gpu_type)
        if on_lease:
            on_lease(lease)
        with open_sandbox(lease, spec_for, kind=compute, gpu_type=gpu_type, on_move=on_lease) as box:
            yield box
    finally:
        scheduler.release(owner)


@contextmanager
def open_sandbox(
    lease: SandboxLease,
    spec_for: SpecFor,
    *,
    kind: str,
    gpu_type: str = "",
    on_move: Callable[[SandboxLease], None] | None = None,
) -> Iterator[Sandbox]:
    """A sandbox on the lease's host, or on another one when that engine does not answer.

    The silent host is marked unhealthy at once (the next run is not sent
    there) and the launch is tried once more on another healthy host, whose
    lease `on_move` is told about. With none left, DockerUnavailable: a
    platform fault, refunded at launch. The spec is made per host (runtime, GPU slot).
    """
    try:
        box = Sandbox(spec_for(lease), lease.host.engine).__enter__()
    except DockerUnavailable as exc:
        health.mark_unhealthy(lease.host, exc.message)
        try:
            lease = scheduler.move(lease, kind, gpu_type)
        except NoCapacity as none_left:
            raise DockerUnavailable(f"{exc.message} No other host could take it: {none_left.message}") from exc
        if on_move:
            on_move(lease)
        try:
            box = Sandbox(spec_for(lease), lease.host.engine).__enter__()
        except DockerUnavailable as again:
            health.mark_unhealthy(lease.host, again.message)
            raise
    try:
        yield box
    finally:
        box.__exit__(None, None, None)
