"""Scale-out: N short harness runs over 2 Docker engines and 2 workers, against 1 engine and 1 worker.

Each configuration gets the same N runs, all started at once (`start_run`,
charged and queued on Redis), and measures:
- throughput: runs per minute, from the first start to the last end;
- queue wait: from start (the row is queued) to a worker's claim, p50/p95.
A worker is one worker machine: `manage.py qcluster` on the runs queue
(tests/workers.py), `--processes` worker processes each (default 1, so a
worker runs one sandbox at a time and the ideal ratio is 2). The second
engine is a real second dockerd on this machine, reached over TCP with TLS
as a remote host would be (tests/second_engine.py); both share this
machine's cores, which a real second host would not.

Usage: .venv/bin/python bench/scale.py [--runs 8] [--sleep 2] [--processes 1] [--runtime auto]
Needs root (a second dockerd), PostgreSQL on 127.0.0.1:5432 and Redis
(BENCH_REDIS_URL, default redis://127.0.0.1:6379/14; only its two queue
keys are touched). Creates and drops database belvedir_bench_scale.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ingest import percentile  # noqa: E402
from bench.throwaway import throwaway_database  # noqa: E402
from tests.second_engine import second_engine_running  # noqa: E402
from tests.workers import RUNS, WorkerMachine  # noqa: E402

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
QUEUE_KEYS = [f"django_q:{RUNS}:q", "django_q:evals:q"]
RUN_PY = "import json, time; time.sleep({sleep}); json.dump({{'score': 1}}, open('results.json', 'w'))\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--sleep", type=float, default=2.0, help="seconds each run's command sleeps")
    parser.add_argument("--processes", type=int, default=1, help="worker processes per worker (Q_WORKERS)")
    parser.add_argument("--runtime", default="auto", choices=["auto", "runc", "runsc"])
    args = parser.parse_args()
    # Before Django loads: the platform (this process too) queues on Redis, as in production.
    os.environ.update(REDIS_URL=REDIS_URL, BELVEDIR_PROJECT_MAX_ACTIVE_RUNS=str(args.runs + 1), BELVEDIR_HARNESS_NETWORK="none")
    queues = redis.from_url(REDIS_URL)
    workdir = Path(tempfile.mkdtemp(prefix="bv-bench-scale-"))
    with throwaway_database("belvedir_bench_scale") as url, second_engine_running(workdir / "second-engine") as second:
        env = {**os.environ, "DATABASE_URL": url, "Q_WORKERS": str(args.processes), "BELVEDIR_ALLOW_LOCAL_REPOS": "1"}
        harness = make_harness(workdir, args.sleep)
        results = {}
        for label, engines, workers in (("1 engine x 1 worker", 1, 1), ("2 engines x 2 workers", 2, 2)):
            queues.delete(*QUEUE_KEYS)
            set_hosts(engines, second, capacity=workers * args.processes, runtime=args.runtime)
            machines = [WorkerMachine(f"{engines}x{i}", env, workdir, queues=(RUNS,)).start() for i in range(workers)]
            try:
                for machine in machines:
                    machine.wait_ready()
                launch(harness, engines)  # warm-up: one run per engine, not counted
                results[label] = launch(harness, args.runs)
            finally:
                for machine in machines:
                    machine.stop()
        queues.delete(*QUEUE_KEYS)
    report(results, args)


def make_harness(workdir: Path, sleep: float):
    from belvedir.core.actions import create_account
    from billing.actions import grant_credit
    from billing.models import Account
    from harnesses.models import Harness
    from tests.harness_fixtures import make_repo

    user = create_account(username="bench", password=None)
    project = user.memberships.get().project
    grant_credit(Account.for_project(project), 1_000_000, "bench", user)
    make_repo(workdir / "repo", {"run.py": RUN_PY.format(sleep=sleep)})
    return Harness.objects.create(
        project=project, created_by=user, name="scale", repo_url=str(workdir / "repo"), install_command="true", run_command="python3 run.py"
    )


def set_hosts(engines: int, second, capacity: int, runtime: str):
    """`local` (the main engine), and with 2 engines `second` over TLS; capacity never the limit."""
    from django.conf import settings

    from belvedir.sandbox.models import SandboxHost

    SandboxHost.objects.update_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL, "capacity": capacity, "runtime": runtime})
    SandboxHost.objects.filter(name="second").delete()
    if engines == 2:
        remote = second.tls_engine()
        SandboxHost.objects.create(
            name="second", url=remote.url, tls_ca=remote.ca, tls_cert=remote.cert, tls_key=remote.key, capacity=capacity, runtime=runtime
        )


def launch(harness, count: int, timeout: float = 1800) -> list:
    """Start `count` runs at once; wait until all ended; return them. Every one must succeed."""
    from django.db import transaction

    from harnesses.actions import start_run
    from harnesses.models import Run

    with transaction.atomic():  # one commit: every run is queued at the same moment
        ids = [start_run(harness, harness.created_by).pk for _ in range(count)]
    deadline = time.monotonic() + timeout
    while Run.objects.filter(pk__in=ids, status__in=Run.ACTIVE).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"runs still active after {timeout} s")
        time.sleep(0.2)
    runs = list(Run.objects.filter(pk__in=ids).select_related("host"))
    failed = [(r.pk, r.status, r.status_message) for r in runs if r.status != "succeeded"]
    if failed:
        raise SystemExit(f"runs did not succeed: {failed}")
    return runs


def report(results: dict, args):
    print(f"{args.runs} runs of `sleep {args.sleep:g}` (network none, runtime {args.runtime}), {args.processes} process(es) per worker")
    throughput = {}
    for label, runs in results.items():
        span = (max(r.finished_at for r in runs) - min(r.created_at for r in runs)).total_seconds()
        waits = [(r.launched_at - r.created_at).total_seconds() for r in runs]
        durations = [(r.finished_at - r.launched_at).total_seconds() for r in runs]
        hosts = sorted({r.host.name for r in runs})
        throughput[label] = len(runs) / span * 60
        print(
            f"  {label:22} {throughput[label]:6.1f} runs/min ({span:.1f} s)   queue wait p50 {percentile(waits, 0.5):5.1f} s, "
            f"p95 {percentile(waits, 0.95):5.1f} s   run (claim to end) mean {statistics.mean(durations):.1f} s   hosts {', '.join(hosts)}"
        )
    small, large = throughput.values()
    print(f"  throughput ratio: {large / small:.2f} x (ideal 2.00 x)")


if __name__ == "__main__":
    main()
