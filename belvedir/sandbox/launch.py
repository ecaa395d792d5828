from collections.abc import Callable, Iterator
from contextlib import contextmanager

from . import health, scheduler
from .docker import Sandbox
from .errors import DockerUnavailable, NoCapacity
from .models import SandboxLease
from .spec import SandboxSpec


@contextmanager
def open_sandbox(
    lease: SandboxLease,
    spec_for: Callable[[SandboxLease], SandboxSpec],
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
