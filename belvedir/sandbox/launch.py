"""A workload's whole life on a sandbox host: lease a place, open its sandboxes, give the place back.

Apps say what to run (the specs for a place) and what to do inside; they
never take or give back a lease, nor see the host's backend. A workload of
several sandboxes (an eval's scorers under gVisor, one per slot) is opened
here as a whole too, so a silent engine moves all of it. Whatever a worker
leaves behind when it dies (a lease, a sandbox) is the reaper's (reaper.py).
"""

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from . import backends, health, images, scheduler
from .backend import Backend, Sandbox
from .errors import BackendUnavailable, NoCapacity
from .models import ComputeType, SandboxHost, SandboxLease
from .owners import Owner
from .spec import SandboxSpec


@dataclass(frozen=True)
class Placement:
    """Where a workload's sandboxes go: its lease (host, GPU slot), and the runtime the host's backend gives them."""

    lease: SandboxLease
    # Resolved from the host's runtime (auto: gVisor where the engine has it).
    runtime: str

    @property
    def host(self) -> SandboxHost:
        return self.lease.host


# A launch on a silent engine moves to another host this many times: one host down is survived,
# a platform losing one host after another is not retried for ever.
MOVES = 1

SpecFor = Callable[[Placement], SandboxSpec]
LayoutFor = Callable[[Placement], list[SandboxSpec]]


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
    and of the next one when the launch moves (see `layout`).
    """
    with layout(owner, lambda place: [spec_for(place)], compute=compute, gpu_type=gpu_type, on_lease=on_lease) as (box,):
        yield box


@contextmanager
def layout(
    owner: Owner,
    specs_for: LayoutFor,
    *,
    compute: str = ComputeType.CPU,
    gpu_type: str = "",
    on_lease: Callable[[SandboxLease], None] | None = None,
) -> Iterator[list[Sandbox]]:
    """The owner's sandboxes, one per spec, all on one host under its one lease; all open, or none.

    When the host's engine does not answer, the host is marked unhealthy at
    once (the next workload is not sent there) and the whole layout is tried
    once more on another healthy host, whose lease `on_lease` hears of. With
    none left, BackendUnavailable: a platform fault, refunded at launch.
    The specs are made per place (runtime, GPU slot).
    """
    try:
        lease = scheduler.acquire_host(owner, compute, gpu_type)
        for moved in range(MOVES + 1):
            if on_lease:
                on_lease(lease)
            try:
                boxes = _start_on(lease, specs_for)
                break
            except BackendUnavailable as exc:
                health.mark_unhealthy(lease.host, exc.message)
                if moved == MOVES:
                    raise
                try:
                    lease = scheduler.move(lease, compute, gpu_type)
                except NoCapacity as none_left:
                    raise BackendUnavailable(f"{exc.message} No other host could take it: {none_left.message}") from exc
        try:
            yield boxes
        finally:
            close(boxes)
    finally:
        scheduler.release(owner)


@contextmanager
def sandboxes(backend: Backend, specs: list[SandboxSpec]) -> Iterator[list[Sandbox]]:
    """Sandboxes for `specs` on `backend`, with no lease: for benches and tests that bring their own engine."""
    boxes = start(backend, specs)
    try:
        yield boxes
    finally:
        close(boxes)


def start(backend: Backend, specs: list[SandboxSpec]) -> list[Sandbox]:
    """Every spec's sandbox started, side by side (under gVisor ~0.7 s each); on any failure, those started are removed again.

    The failure raised is BackendUnavailable when one part met a silent
    engine (the layout moves as a whole), else the first part's. An image
    built from a recipe is built on this engine first, once (images.py).
    """
    built = {recipe: images.ensure(backend, recipe)[0] for recipe in dict.fromkeys(spec.recipe for spec in specs if spec.recipe)}
    for spec in specs:
        if spec.recipe:
            spec.image = built[spec.recipe]
    if len(specs) == 1:
        return [backend.sandbox(specs[0]).__enter__()]
    with ThreadPoolExecutor(len(specs)) as pool:
        futures = [pool.submit(lambda spec: backend.sandbox(spec).__enter__(), spec) for spec in specs]
    failed = [future.exception() for future in futures if future.exception() is not None]
    if failed:
        close([future.result() for future in futures if future.exception() is None])
        raise next((exc for exc in failed if isinstance(exc, BackendUnavailable)), failed[0])
    return [future.result() for future in futures]


def close(boxes: list[Sandbox]):
    """Every sandbox ended and removed, side by side as they were started (under gVisor a removal is a few tenths of a
    second: a sealed trial's second sandbox would add its own to the trial's wall). Each is tried whatever the others
    do; the first failure is raised after."""
    if len(boxes) == 1:
        boxes[0].__exit__(None, None, None)
        return
    with ThreadPoolExecutor(len(boxes)) as pool:
        futures = [pool.submit(box.__exit__, None, None, None) for box in boxes]
    failed = [future.exception() for future in futures if future.exception() is not None]
    if failed:
        raise failed[0]


def _start_on(lease: SandboxLease, specs_for: LayoutFor) -> list[Sandbox]:
    backend = backends.for_host(lease.host)
    return start(backend, specs_for(Placement(lease, backend.runtime(lease.host.runtime))))
