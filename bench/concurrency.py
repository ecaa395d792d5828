"""The engine's adaptive concurrency (evals/concurrency.py) against the fake OpenAI server, in its own process.

(a) A deployment allowed 512 in flight, the fake answering every request in 200 ms: the engine's throughput
    against the ideal (512 / 0.2 s = 2,560 answers a second). Measured in the same run: the engine with the
    fixed gate it had before (a semaphore of 512, told nothing), alternated with the adaptive one, and a bare
    aiohttp client keeping 512 in flight on the same fake with the same rows (the transport's own ceiling on
    this machine). Target: >= 0.95 x the ideal.
(b) A deployment allowed 1,024, the fake taking 300 requests at once and answering 429 (Retry-After: 1)
    beyond: where the engine's level settles (the median of the level it allowed, and of what it had in
    flight, over the last half of the run, from the eval's own chart series) and how many rows it lost.
    Target: within 10 % of 300, no row lost. At 200 ms and then at 1 s per request (--latency-b): at 200 ms,
    1,500 answers a second at capacity, two cores shared with other work may not keep up with; the client's
    own latency then doubles and the level settles where its CPU does, not the server. At 1 s, 300 a second.

Usage: DEBUG=1 .venv/bin/python bench/concurrency.py [--part a|b|both] [--rows-a 20000] [--rounds 2] [--rows-b 20000] [--latency-b 0.2 1.0]
Uses a throwaway SQLite database under a temporary directory.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LATENCY = 0.2

from eval_engine import bare_client_time  # noqa: E402  (bench/ is the script's own folder)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows-a", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2, help="(a): runs of each gate, alternated")
    parser.add_argument("--rows-b", type=int, default=20_000)
    parser.add_argument("--latency-b", type=float, nargs="+", default=[0.2, 1.0])
    parser.add_argument("--part", choices=["a", "b", "both"], default="both")
    args = parser.parse_args()
    os.environ.update(BELVEDIR_VAR_DIR=tempfile.mkdtemp(prefix="bv-bench-"), DJANGO_SETTINGS_MODULE="belvedir.settings", LOG_LEVEL="WARNING")
    os.environ.pop("DATABASE_URL", None)
    os.environ["BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS"] = "1"  # the fake server is on 127.0.0.1
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from belvedir.core.actions import create_account

    user = create_account(username="bench", password=None)
    project = user.memberships.get().project
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; the fake server in its own process")
    if args.part in ("a", "both"):
        at_512(project, user, args.rows_a, args.rounds)
    if args.part in ("b", "both"):
        for latency in args.latency_b:
            at_capacity(project, user, args.rows_b, latency)
    print(f"load at the end: {os.getloadavg()[0]:.1f}")


def at_512(project, user, rows: int, rounds: int):
    from evals import engine
    from evals.concurrency import AdaptiveLimit

    ideal = rows / (512 / LATENCY)
    walls = {"adaptive": [], "fixed": []}
    with fake_server(LATENCY) as (url, counts):
        bare = bare_client_time(url, rows, 512)
        for n in range(rounds):
            for gate in ("adaptive", "fixed"):
                engine.AdaptiveLimit = AdaptiveLimit if gate == "adaptive" else FixedGate
                ev, wall = run(project, user, url, rows, max_in_flight=512, name=f"512 {gate} {n}")
                report(ev, rows)
                walls[gate].append(wall)
                levels = [point[1] for point in ev.concurrency]
                print(f"    {gate} gate: wall {wall:.2f} s = {ideal / wall:.3f} x the ideal; levels allowed, about once a second: {levels}")
    engine.AdaptiveLimit = AdaptiveLimit
    adaptive, fixed = statistics.median(walls["adaptive"]), statistics.median(walls["fixed"])
    print(f"(a) {rows} rows at up to 512 in flight, {LATENCY * 1000:.0f} ms per request: ideal {ideal:.2f} s")
    print(f"    the engine, adaptive gate: median {adaptive:.2f} s = {ideal / adaptive:.3f} x the ideal (target >= 0.95)")
    print(f"    the engine, fixed gate of 512: median {fixed:.2f} s = {ideal / fixed:.3f} x; the adaptive gate {fixed / adaptive:.3f} x its throughput")
    print(f"    a bare aiohttp client at 512: {bare:.2f} s = {ideal / bare:.3f} x the ideal; the engine (adaptive) {bare / adaptive:.3f} x the bare client")


def at_capacity(project, user, rows: int, latency: float):
    with fake_server(latency, capacity=300) as (url, counts):
        ev, wall = run(project, user, url, rows, max_in_flight=1024, name=f"capacity 300, {latency} s")
    report(ev, rows)
    tail = ev.concurrency[len(ev.concurrency) // 2 :]
    allowed, in_flight = statistics.median(p[1] for p in tail), statistics.median(p[2] for p in tail)
    lost = rows - (ev.done_count - ev.error_count)
    print(
        f"(b) {rows} rows, {latency * 1000:.0f} ms per request, a fake of capacity 300 (429 beyond), the deployment allowing 1,024: wall {wall:.2f} s "
        f"({rows / wall:.0f} answers/s; 300 in flight would answer {300 / latency:.0f}/s: {rows / wall / (300 / latency):.3f} x)"
    )
    print(f"    over the last half: median level allowed {allowed:.0f} ({allowed / 300:.3f} x 300), in flight {in_flight:.0f} (target: within 10 % of 300)")
    print(
        f"    rows lost: {lost} (target 0); the fake answered {counts.get('answered')}, refused {counts.get('refused')} (429), peak {counts.get('peak_in_flight')} in flight"
    )
    print(f"    series [s, allowed, in flight, answers/s]: {ev.concurrency}")


def run(project, user, url: str, rows: int, *, max_in_flight: int, name: str):
    from evals.actions import create_eval
    from evals.datasets.versions import create_dataset
    from evals.models import Deployment
    from evals.tasks import run_eval

    # Each run's own questions: none is answered from the response cache (the fake answers a question's last word).
    data = "".join(f'{{"input": "{name}: question {i}", "expected": "{i}"}}\n' for i in range(rows)).encode()
    dataset = create_dataset(project, user, f"bench {name}", data)
    deployment = Deployment.objects.create(project=project, name=name, base_url=url, model="fake", max_in_flight=max_in_flight)
    ev = create_eval(project, user, deployment=deployment, dataset=dataset, scorers=["exact_match"])
    started = time.perf_counter()
    run_eval(ev.pk)
    wall = time.perf_counter() - started
    ev.refresh_from_db()
    return ev, wall


def report(ev, rows: int):
    print(f"eval {ev.status}: {ev.done_count}/{rows} rows stored, {ev.error_count} errored, score {ev.score}")


class fake_server:
    """The fake in a process of its own, as a real endpoint would be; `counts` is filled from what it prints as it stops."""

    def __init__(self, latency: float, capacity: int | None = None):
        self.argv = [sys.executable, "-m", "tests.fakes.openai_server", str(latency)] + ([str(capacity)] if capacity else [])
        self.counts: dict = {}

    def __enter__(self):
        self.process = subprocess.Popen(self.argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        return self.process.stdout.readline().strip(), self.counts

    def __exit__(self, *exc):
        self.process.terminate()
        out, _ = self.process.communicate(timeout=30)
        if out.strip():
            self.counts.update(json.loads(out.strip().splitlines()[-1]))


class FixedGate(asyncio.Semaphore):
    """The engine's gate before evals/concurrency.py: a fixed level, told nothing, holding its slot through a backoff."""

    def __init__(self, maximum: int):
        super().__init__(maximum)
        self.allowed, self.in_flight, self.answered = maximum, 0, 0
        # What the engine asks of any gate since deployments' caps are shared (evals/shares.py): told its share, it
        # keeps its fixed level, as the gate it stands for did.
        self.maximum = self.level = self.share = maximum

    def set_share(self, share: int):
        self.share = share

    def take_wanted(self) -> int:
        return self.maximum

    async def acquire(self):
        await super().acquire()
        self.in_flight += 1

    def release(self):
        self.in_flight -= 1
        super().release()

    def observe(self, status, started) -> bool:
        self.answered += status == 200
        return True

    async def backoff(self, delay: float):
        await asyncio.sleep(delay)


if __name__ == "__main__":
    main()
