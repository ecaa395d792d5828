"""What a warm pool's claim would cost and whether it can be trusted, before a pool is built (issue 56).

Per runtime (runc, runsc):
- claim: a pool of `--pool` sandboxes started as the platform starts them (DockerSandbox, network none), kept full
  by a thread that starts another after each claim. Each of `--claims` claims, `--interval` seconds apart, renames
  the oldest pooled container from its pool name to a workload's name, checks that it still runs, and runs the
  workload's first command (`true`); a claim that finds the pool empty starts a sandbox as today (counted);
- fresh: the same workload's start, DockerSandbox's, then the same first command: today's path.
It prints p50/p95/p99 of each, as sandbox leaderboards report create-to-first-command, and of the claim alone.

Then `--races` races: two threads claim one pooled container at once, each renaming it by its pool name to a
name of its own. A claim is trusted only if exactly one of them wins every time; the count of containers claimed
twice is printed (the engine resolves the old name, then renames whatever the container is called by then).

Usage: DEBUG=1 .venv/bin/python bench/pool_claim.py [--pool 4] [--claims 100] [--interval 0.5] [--races 50]
Needs the Docker engine and the sandbox image (`make test` sets them up).
"""

import argparse
import collections
import functools
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)

    def at(q):
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000

    return f"p50 {statistics.median(ordered) * 1000:6.0f} ms   p95 {at(0.95):6.0f} ms   p99 {at(0.99):6.0f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", type=int, default=4)
    parser.add_argument("--claims", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between claims")
    parser.add_argument("--races", type=int, default=50)
    parser.add_argument("--runtimes", default="runc,runsc")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "belvedir.settings")
    import django

    django.setup()
    from django.conf import settings

    from belvedir.sandbox.backends.docker_sandbox import DockerSandbox
    from belvedir.sandbox.owners import Owner
    from belvedir.sandbox.spec import SandboxSpec

    run = uuid.uuid4().hex[:6]

    def sandbox(kind: str, runtime: str) -> DockerSandbox:
        owner = Owner(f"bench{kind}", f"{run}{uuid.uuid4().hex[:8]}")
        return DockerSandbox(SandboxSpec(owner=owner, runtime=runtime, network="none"), settings.SANDBOX_DOCKER_URL)

    print(f"machine: {os.cpu_count()} CPUs, image {settings.SANDBOX_IMAGE}; pool {args.pool}, {args.claims} claims {args.interval} s apart")
    for runtime in args.runtimes.split(","):
        claims, renamed, empty = from_the_pool(
            Pool(functools.partial(sandbox, "pool", runtime), args.pool), functools.partial(sandbox, "claim", runtime), args, f"{run}-{runtime}"
        )
        fresh = fresh_starts(functools.partial(sandbox, "fresh", runtime), min(args.claims, 30), args.interval)
        print(f"{runtime}: claim from the pool   {percentiles(claims)}   ({empty} of {len(claims)} found it empty and started one)")
        print(f"{runtime}:   of which the claim  {percentiles(renamed)}   (the rename and a look that it runs; the rest is the first command)")
        print(f"{runtime}: fresh start           {percentiles(fresh)}   ({len(fresh)} starts)")
        print(f"{runtime}: claim / fresh at p50  {statistics.median(claims) / statistics.median(fresh):.2f}x")
        twice = sum(raced(functools.partial(sandbox, "race", runtime)().__enter__(), f"{run}-{runtime}-{n}") for n in range(args.races))
        print(f"{runtime}: {args.races} races of two claimers for one pooled sandbox by its pool name: {twice} claimed twice")


class Pool:
    """Started, never-used sandboxes, kept at `size` by a thread that starts another after each claim."""

    def __init__(self, make, size: int):
        self.make, self.size = make, size
        self.boxes: collections.deque = collections.deque()
        self.changed = threading.Condition()
        self.stop = threading.Event()
        self.filler = threading.Thread(target=self.refill, daemon=True)

    def __enter__(self):
        self.filler.start()
        with self.changed:
            self.changed.wait_for(lambda: len(self.boxes) >= self.size, timeout=120)
        return self

    def refill(self):
        while not self.stop.is_set():
            with self.changed:
                if len(self.boxes) >= self.size:
                    self.changed.wait(0.05)
                    continue
            box = self.make().__enter__()
            with self.changed:
                self.boxes.append(box)
                self.changed.notify_all()

    def take(self):
        with self.changed:
            box = self.boxes.popleft() if self.boxes else None
            self.changed.notify_all()
        return box

    def __exit__(self, *exc):
        self.stop.set()
        self.filler.join(60)
        for box in self.boxes:
            box.__exit__(None, None, None)


def from_the_pool(pool: Pool, make, args, tag: str) -> tuple[list[float], list[float], int]:
    """Seconds of each claim to its first command's answer, of the claim alone, and how many found the pool empty."""
    claims, renamed, empty, claimed = [], [], 0, []
    with pool:
        try:
            for n in range(args.claims):
                time.sleep(args.interval)
                started = time.perf_counter()
                box = pool.take()
                if box is None:
                    empty += 1
                    box = make().__enter__()
                else:
                    box.client.api.rename(box.spec.name, f"bv-bench-claimed-{tag}-{n}")
                    box.container.reload()
                    assert box.container.status == "running", box.container.status
                    renamed.append(time.perf_counter() - started)
                claimed.append(box)
                result = box.exec("true", timeout=30)
                claims.append(time.perf_counter() - started)
                assert result.exit_code == 0, result.output
        finally:
            for box in claimed:
                box.__exit__(None, None, None)
    return claims, renamed, empty


def fresh_starts(make, count: int, interval: float) -> list[float]:
    """Seconds of each fresh start to its first command's answer."""
    fresh = []
    for _ in range(count):
        time.sleep(interval)
        started = time.perf_counter()
        box = make().__enter__()
        try:
            assert box.exec("true", timeout=30).exit_code == 0
            fresh.append(time.perf_counter() - started)
        finally:
            box.__exit__(None, None, None)
    return fresh


def raced(box, tag: str) -> bool:
    """Whether two claimers renaming one pooled sandbox by its pool name at once both succeeded; the box is removed."""
    from docker import errors as docker_errors

    barrier, won = threading.Barrier(2), []

    def claim(side: str):
        barrier.wait()
        try:
            box.client.api.rename(box.spec.name, f"bv-bench-race-{tag}-{side}")
            won.append(side)
        except docker_errors.APIError:
            pass

    try:
        threads = [threading.Thread(target=claim, args=(side,)) for side in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        box.__exit__(None, None, None)
    return len(won) > 1


if __name__ == "__main__":
    main()
