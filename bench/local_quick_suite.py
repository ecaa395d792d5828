"""The home page's quick suite on the local model, as a newcomer presses it: its wall time and its numbers.

A throwaway PostgreSQL database, `manage.py serve_local_model` (the real SmolLM2-135M-Instruct weights, two threads)
and a real eval worker cluster (`Q_CLUSTER_NAME=evals manage.py qcluster`, Q_EVAL_WORKERS workers), then
`run_quick_suite_on_local_model` for a new project, timed from the press to its last eval's end. Prints each
benchmark's score, 95% interval, chance and what the interval says against it, its rows, errors and time.
Target: the suite within 300 s on this 2-core machine, no eval failed, every answer the model's own.

Usage: .venv/bin/python bench/local_quick_suite.py   (needs `manage.py install_local_model`)
"""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from throwaway import throwaway_database  # noqa: E402


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main():
    port = free_port()
    os.environ.update(BELVEDIR_LOCAL_MODEL_URL=f"http://127.0.0.1:{port}/v1", BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS="1")
    with throwaway_database("belvedir_bench_local_quick_suite") as url:
        from belvedir.core.actions import create_account
        from evals.models import Eval
        from evals.suites.actions import run_quick_suite_on_local_model

        env = {**os.environ, "DATABASE_URL": url}
        server = subprocess.Popen([sys.executable, "manage.py", "serve_local_model", "--port", str(port)], cwd=ROOT, env=env)
        worker = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, env={**env, "Q_CLUSTER_NAME": "evals"}, stderr=subprocess.DEVNULL)
        try:
            time.sleep(6)  # the server loads the weights, the cluster starts its workers, as `make run` has long before a press
            user = create_account(username="newcomer", password=None)
            project = user.memberships.get().project
            started = time.perf_counter()
            run = run_quick_suite_on_local_model(project, user)
            while Eval.objects.filter(suite_run=run, status__in=Eval.ACTIVE).exists():
                time.sleep(0.5)
            wall = time.perf_counter() - started
            evals = list(run.evals.order_by("pk"))
        finally:
            worker.terminate()
            server.terminate()
            worker.wait(30), server.wait(30)
        print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; eval workers: {os.environ.get('Q_EVAL_WORKERS', '2')}")
        print(f"{'benchmark':<14} {'mode':<14} {'rows':>5} {'errors':>6} {'score':>6}  {'95% CI':<13} {'chance':>6}  {'time':>6}  against chance")
        for ev in evals:
            ci = f"{ev.score_low:.3f}-{ev.score_high:.3f}" if ev.score_low is not None else "-"
            seconds = (ev.finished_at - ev.started_at).total_seconds() if ev.finished_at and ev.started_at else 0
            answered = ev.samples.exclude(output="").count() if ev.mode == "generative" else ev.done_count
            print(
                f"{ev.benchmark:<14} {ev.mode:<14} {ev.done_count:>5} {ev.error_count:>6} {ev.score if ev.score is not None else float('nan'):>6.3f}  {ci:<13} "
                f"{ev.chance if ev.chance is not None else float('nan'):>6.2f}  {seconds:>5.0f}s  {ev.against_chance or ev.status_message[:80]}"
                + (f" ({answered} of {ev.done_count} answered)" if ev.mode == "generative" else "")
            )
        failed = [ev.benchmark for ev in evals if ev.status != "succeeded"]
        print(f"left out: {'; '.join(run.notes)}")
        print(f"quick suite on the local model: {wall:.0f} s from the press to its last eval's end (target <= 300 s); failed: {failed or 'none'}")


if __name__ == "__main__":
    main()
