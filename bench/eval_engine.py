"""Eval engine throughput against its ideal.

2,000 rows against the fake OpenAI server (200 ms per request) at 100 in
flight; the ideal wall time is rows / 100 x 0.2 s = 4.0 s. Prints the
measured wall time and its ratio to the ideal (target: within 10%).

Usage: .venv/bin/python bench/eval_engine.py [--rows 2000] [--latency 0.2] [--benchmark mmlu]
(--benchmark: that benchmark's whole split instead, with its prompts and scorer; data from var/benchmarks.)
Uses a throwaway SQLite database under a temporary directory.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--benchmark", default="", help="A catalog benchmark's whole split instead of a dataset of --rows rows.")
    args = parser.parse_args()
    # The throwaway var directory has no benchmark data: read the installed one.
    os.environ.setdefault("BELVEDIR_BENCHMARK_DATA_DIR", str(ROOT / "var" / "benchmarks"))
    os.environ.update(BELVEDIR_VAR_DIR=tempfile.mkdtemp(prefix="bv-bench-"), DJANGO_SETTINGS_MODULE="belvedir.settings", LOG_LEVEL="WARNING")
    os.environ.pop("DATABASE_URL", None)
    os.environ["BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS"] = "1"  # the fake server is on 127.0.0.1
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from belvedir.core.actions import create_account
    from evals import benchmarks
    from evals.actions import create_eval
    from evals.models import Deployment
    from evals.tasks import run_eval

    user = create_account(username="bench", password=None)
    project = user.memberships.get().project
    # gsm8k has 1,319 rows: a dataset of the wanted size stands in for bigger runs.
    from evals.datasets.versions import create_dataset

    data = "".join(f'{{"input": "question {i}", "expected": "{i}"}}\n' for i in range(args.rows)).encode()
    dataset = create_dataset(project, user, "bench", data)
    # The fake server runs in its own process, as a real endpoint would: in
    # this one it would compete with the engine for the same interpreter.
    fake = subprocess.Popen([sys.executable, "-m", "tests.fakes.openai_server", str(args.latency)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        url = fake.stdout.readline().strip()
        deployment = Deployment.objects.create(project=project, name="fake", base_url=url, model="fake", max_in_flight=100)
        if args.benchmark:
            ev = create_eval(project, user, deployment=deployment, benchmark=args.benchmark)
            args.rows = len(benchmarks.get(args.benchmark).rows())
        else:
            ev = create_eval(project, user, deployment=deployment, dataset=dataset, scorers=["exact_match"])
        started = time.perf_counter()
        run_eval(ev.pk)
        wall = time.perf_counter() - started
        ev.refresh_from_db()
        floor = bare_client_time(url, args.rows)
    finally:
        fake.terminate()
    ideal = args.rows / 100 * args.latency
    print(
        f"machine: {os.cpu_count()} CPUs; {args.rows} rows{f' of {args.benchmark}' if args.benchmark else ''}, {args.latency * 1000:.0f} ms per request, 100 in flight"
    )
    print(f"eval {ev.status}: score {ev.score}, errors {ev.error_count}")
    if ev.error_count:
        # A row that errored asked nothing: its speed is not the engine's.
        raise SystemExit(f"{ev.error_count} rows errored ({ev.status_message or 'see the eval'}): no figure.")
    print(f"wall {wall:.2f} s   ideal {ideal:.2f} s   ratio {wall / ideal:.3f}   (target <= 1.10)")
    print(f"floor: a bare aiohttp client, same fake, same rows: {floor:.2f} s = {floor / ideal:.3f} x ideal; the engine adds {wall / floor - 1:.1%} over it")


def bare_client_time(url: str, rows: int, in_flight: int = 100) -> float:
    """The transport alone: `in_flight` requests at once through aiohttp on uvloop, no engine around it (bench/concurrency.py too)."""
    import asyncio

    import aiohttp
    import uvloop

    async def run():
        gate = asyncio.Semaphore(in_flight)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=in_flight)) as session:

            async def one(i):
                async with gate:
                    async with session.post(
                        f"{url}/chat/completions", json={"model": "fake", "messages": [{"role": "user", "content": f"question {i}"}]}
                    ) as response:
                        await response.read()

            started = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(rows)))
            return time.perf_counter() - started

    return uvloop.run(run())


if __name__ == "__main__":
    main()
