"""Eval engine throughput against its ideal and against the bare transport.

2,000 rows against the fake OpenAI server (200 ms per request) at 100 in
flight; the ideal wall time is rows / 100 x 0.2 s = 4.0 s. Prints the
measured wall time, its ratio to the ideal, and the ratio of a bare aiohttp
client's time (same fake, same rows, same in flight, measured in the same
run) to the engine's: the engine's throughput as a share of the transport's.

Usage: .venv/bin/python bench/eval_engine.py [--rows 2000] [--latency 0.2] [--benchmark mmlu] [--in-flight 100] [--rounds 1] [--db sqlite|postgres]
(--benchmark: that benchmark's whole split instead, with its prompts and scorer; data from var/benchmarks.)
--db sqlite (the default): a throwaway SQLite database under a temporary directory, as `make run` has;
--db postgres: a throwaway PostgreSQL database (bench/throwaway.py), as a production worker has.
DEBUG is off either way: its query log is no production worker's cost.
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
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1, help="engine runs, each followed by a bare client's")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    # The throwaway var directory has no benchmark data: read the installed one.
    os.environ.setdefault("BELVEDIR_BENCHMARK_DATA_DIR", str(ROOT / "var" / "benchmarks"))
    os.environ.update(BELVEDIR_VAR_DIR=tempfile.mkdtemp(prefix="bv-bench-"), DJANGO_SETTINGS_MODULE="belvedir.settings", LOG_LEVEL="WARNING")
    os.environ.update(DEBUG="0", SECRET_KEY="bench-" + "x" * 40, ALLOWED_HOSTS="localhost")
    os.environ["BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS"] = "1"  # the fake server is on 127.0.0.1
    if args.db == "postgres":
        from throwaway import throwaway_database

        with throwaway_database("bench_eval_engine"):
            measure(args)
        return
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    measure(args)


def measure(args):
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
    if args.benchmark:
        args.rows = len(benchmarks.get(args.benchmark).rows())
    ideal = args.rows / args.in_flight * args.latency
    print(
        f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; {args.db}; {args.rows} rows{f' of {args.benchmark}' if args.benchmark else ''}, "
        f"{args.latency * 1000:.0f} ms per request, {args.in_flight} in flight; ideal {ideal:.2f} s"
    )
    # The fake server runs in its own process, as a real endpoint would: in
    # this one it would compete with the engine for the same interpreter.
    fake = subprocess.Popen([sys.executable, "-m", "tests.fakes.openai_server", str(args.latency)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    ratios = []
    try:
        url = fake.stdout.readline().strip()
        for n in range(args.rounds):
            # Each round's own model name: its requests' keys are new, so the response cache is looked up and written
            # as on a first run, never answered from an earlier round.
            deployment = Deployment.objects.create(project=project, name=f"fake {n}", base_url=url, model=f"fake-{n}", max_in_flight=args.in_flight)
            if args.benchmark:
                ev = create_eval(project, user, deployment=deployment, benchmark=args.benchmark)
            else:
                ev = create_eval(project, user, deployment=deployment, dataset=dataset, scorers=["exact_match"])
            spent = _cpu(fake.pid)
            started = time.perf_counter()
            run_eval(ev.pk)
            wall = time.perf_counter() - started
            engine_cpu = [b - a for a, b in zip(spent, _cpu(fake.pid), strict=True)]
            ev.refresh_from_db()
            if ev.error_count or ev.done_count != args.rows:
                # A row that errored asked nothing: its speed is not the engine's.
                raise SystemExit(f"{ev.error_count} rows errored, {ev.done_count} stored ({ev.status_message or 'see the eval'}): no figure.")
            spent = _cpu(fake.pid)
            floor, client_cpu = bare_client(url, args.rows, args.in_flight)
            bare_cpu = [client_cpu] + [b - a for a, b in zip(spent[1:], _cpu(fake.pid)[1:], strict=True)]
            ratios.append(floor / wall)
            print(
                f"round {n + 1}: eval {ev.status}, score {ev.score}: wall {wall:.2f} s = {wall / ideal:.3f} x the ideal; "
                f"the bare client (its own process) {floor:.2f} s = {floor / ideal:.3f} x; the engine {floor / wall:.3f} x the bare client's throughput"
            )
            per_row = 1000 / args.rows
            print(
                "    CPU ms a row (this process / the fake / the database): "
                f"the engine {' / '.join(f'{c * per_row:.2f}' for c in engine_cpu)}, the bare client {' / '.join(f'{c * per_row:.2f}' for c in bare_cpu)}"
            )
    finally:
        fake.terminate()
        fake.wait()
    print(f"the engine / the bare client, throughput: {', '.join(f'{r:.3f}' for r in ratios)} (targets: >= 0.95 at 100 in flight, >= 0.9 at 512)")


def _cpu(fake_pid: int) -> list[float]:
    """CPU seconds so far of this process (the engine, its ORM thread, or the bare client), the fake, and PostgreSQL's processes."""
    from cpu import cpu_seconds, postgres_processes

    return [time.process_time(), cpu_seconds(fake_pid), sum(cpu_seconds(pid) for pid in postgres_processes())]


def bare_client_time(url: str, rows: int, in_flight: int = 100) -> float:
    """The transport alone's wall time (bench/concurrency.py too): see `bare_client`."""
    return bare_client(url, rows, in_flight)[0]


def bare_client(url: str, rows: int, in_flight: int) -> tuple[float, float]:
    """The transport alone: `in_flight` requests at once through aiohttp on uvloop, no engine around it, in a fresh
    process of its own (in this one it would pay for collecting the engine's heap: a third of its CPU at 512 in
    flight). Its wall time and CPU seconds."""
    out = subprocess.run([sys.executable, __file__, "--bare", url, str(rows), str(in_flight)], capture_output=True, text=True, check=True).stdout
    wall, cpu = map(float, out.split())
    return wall, cpu


def _bare(url: str, rows: int, in_flight: int):
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

            started, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(one(i) for i in range(rows)))
            return time.perf_counter() - started, time.process_time() - cpu

    print(*uvloop.run(run()))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--bare"]:
        _bare(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
