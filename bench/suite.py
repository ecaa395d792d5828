"""The `quick` suite on two deployments: its wall time against its evals run one by one, and against the ideal.

Every catalog benchmark at 100 rows (MT-Bench with a judge) against two fake
OpenAI-compatible servers, each answering after --latency seconds and taking
100 requests in flight, as separate processes; the sandboxed benchmarks
(humaneval, mbpp) scored under the engine's default runtime. In one run:
- one by one: each of the 22 evals alone, through `run_eval` in this
  process, one after another; the figure is the sum of their walls;
- the suite: `create_suite_run` and a real eval worker cluster
  (`Q_CLUSTER_NAME=evals manage.py qcluster`, Q_EVAL_WORKERS workers, the ORM
  broker) doing the rest, from its creation to its last eval's end;
- ideal: each deployment's requests at 100 in flight with no overhead at all
  (per eval, ceil(requests / 100) rounds of --latency, MT-Bench's turns one
  after another, its judge's rounds after them), the deployments side by side.
A suite must not be slower than its evals one by one.

Usage: .venv/bin/python bench/suite.py [--latency 0.2]   (~3 min here; needs the Docker engine and sandbox image of `make test`)
"""

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from throwaway import throwaway_database  # noqa: E402


def fake_server(latency: float) -> tuple[subprocess.Popen, str]:
    # Each in its own process, as a real endpoint would be: in this one it would compete with the engine.
    process = subprocess.Popen([sys.executable, "-m", "tests.fakes.openai_server", str(latency)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().strip()


def ideal_seconds(evals, latency: float) -> float:
    """Each deployment's evals back to back, each at 100 requests a round; the deployments side by side."""
    per_deployment = {}
    for ev in evals:
        turns = 2 if ev.benchmark == "mt_bench" else 1
        rounds = math.ceil(ev.total / 100) * turns + (math.ceil(ev.total * 2 / 100) if ev.judge_id else 0)
        per_deployment[ev.deployment_id] = per_deployment.get(ev.deployment_id, 0) + rounds * latency
    return max(per_deployment.values())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    os.environ["BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS"] = "1"  # the fake servers are on 127.0.0.1
    with throwaway_database("belvedir_bench_suite") as url:
        from belvedir.core.actions import create_account
        from evals.actions import create_eval
        from evals.models import Deployment, Eval
        from evals.suites.actions import create_suite_run
        from evals.tasks import run_eval

        user = create_account(username="bench", password=None)
        project = user.memberships.get().project
        servers = [fake_server(args.latency) for _ in range(3)]
        worker = None
        try:
            a, b, judge = (
                Deployment.objects.create(project=project, name=name, base_url=server_url, model=name, max_in_flight=100)
                for name, (_, server_url) in zip(("a", "b", "judge"), servers, strict=True)
            )
            # One by one: every eval of the suite alone, in turn.
            plan = create_suite_run(project, user, suite_name="quick", deployments=[a, b], judge=judge)
            cells = [(ev.benchmark, ev.deployment, ev.seed, ev.sample_limit) for ev in plan.evals.order_by("pk")]
            Eval.objects.filter(suite_run=plan).update(status=Eval.Status.CANCELLED)  # only its plan was wanted
            alone, walls = [], []
            for benchmark, deployment, seed, limit in cells:
                ev = create_eval(
                    project, user, deployment=deployment, benchmark=benchmark, sample_limit=limit, seed=seed, judge=judge if benchmark == "mt_bench" else None
                )
                started = time.perf_counter()
                run_eval(ev.pk)
                walls.append(time.perf_counter() - started)
                alone.append(Eval.objects.get(pk=ev.pk))
            one_by_one = sum(walls)

            # The suite, through a real eval worker cluster.
            env = {**os.environ, "DATABASE_URL": url, "Q_CLUSTER_NAME": "evals"}
            worker = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(3)  # the cluster's workers start (a second or two), as they would long before a suite is run
            started = time.perf_counter()
            run = create_suite_run(project, user, suite_name="quick", deployments=[a, b], judge=judge)
            while Eval.objects.filter(suite_run=run, status__in=Eval.ACTIVE).exists():
                time.sleep(0.1)
            suite_wall = time.perf_counter() - started
            evals = list(run.evals.select_related("deployment"))
        finally:
            if worker is not None:
                worker.terminate()
                worker.wait(30)
            for process, _ in servers:
                process.terminate()
        ideal = ideal_seconds(evals, args.latency)
        print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; quick suite: {len(evals)} evals (100 rows each), 2 deployments + a judge")
        print(f"fake servers: {args.latency * 1000:.0f} ms per request, 100 in flight; eval workers: {os.environ.get('Q_EVAL_WORKERS', '2')}")
        bad = [(ev.benchmark, ev.deployment.name, ev.status, ev.status_message[:200]) for ev in evals + alone if ev.status != "succeeded"]
        print(f"every eval succeeded: {not bad}{'' if not bad else f' {bad}'}")
        print(
            "slowest alone: "
            + ", ".join(f"{ev.benchmark}/{ev.deployment.name} {wall:.1f} s" for wall, ev in sorted(zip(walls, alone, strict=True), key=lambda p: -p[0])[:5])
        )
        print(f"one by one (sum of walls)   {one_by_one:7.2f} s")
        print(f"suite run                   {suite_wall:7.2f} s   {suite_wall / one_by_one:.2f} x one by one   (target <= 1.00)")
        print(f"ideal                       {ideal:7.2f} s   suite {suite_wall / ideal:.1f} x ideal")
        for deployment in (a, b):
            mine = sorted((ev for ev in evals if ev.deployment_id == deployment.pk), key=lambda ev: ev.started_at)
            running = sum((ev.finished_at - ev.started_at).total_seconds() for ev in mine)
            waiting = sum((later.started_at - earlier.finished_at).total_seconds() for earlier, later in zip(mine, mine[1:], strict=False))
            print(f"deployment {deployment.name}: its evals ran {running:.2f} s in all, waited {waiting:.2f} s between one's end and the next's start")


if __name__ == "__main__":
    main()
