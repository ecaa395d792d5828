"""An identical gsm8k re-run against the response cache: requests sent, wall time and cost, against the first run.

The whole split (1,319 rows) against the fake OpenAI server (200 ms per request, priced at $1/$2 per million
tokens), twice with the same settings; the first run is the baseline, measured in the same process.
Targets (issue #43): the re-run sends 0 completion requests, takes ≤ 2 s and costs $0.

Usage: DEBUG=1 .venv/bin/python bench/response_cache.py [--latency 0.2] [--benchmark gsm8k]
Uses a throwaway SQLite database under a temporary directory (DATABASE_URL unset), or PostgreSQL with --postgres.
"""

import argparse
import os
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--benchmark", default="gsm8k")
    parser.add_argument("--postgres", action="store_true", help="Keep DATABASE_URL (a PostgreSQL database the bench may fill) instead of SQLite.")
    args = parser.parse_args()
    os.environ.setdefault("BELVEDIR_BENCHMARK_DATA_DIR", str(ROOT / "var" / "benchmarks"))
    os.environ.update(BELVEDIR_VAR_DIR=tempfile.mkdtemp(prefix="bv-bench-"), DJANGO_SETTINGS_MODULE="belvedir.settings", LOG_LEVEL="WARNING")
    if not args.postgres:
        os.environ.pop("DATABASE_URL", None)
    os.environ["BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS"] = "1"  # the fake server is on 127.0.0.1
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from belvedir.core.actions import create_account
    from billing.models import LedgerEntry
    from evals.actions import create_eval
    from evals.benchmarks import gsm8k
    from evals.models import Deployment
    from evals.tasks import run_eval
    from tests.fakes.openai_server import FakeOpenAI

    references = {row["input"]: row["reference"] for row in gsm8k.rows()}
    user = create_account(username=f"bench-{time.time_ns()}", password=None)
    project = user.memberships.get().project
    with FakeOpenAI(answer=lambda q: f"#### {references.get(q, '0')}", latency=args.latency) as fake:
        deployment = Deployment.objects.create(
            project=project, name="fake", base_url=fake.url, model="fake", input_price_per_million=Decimal(1), output_price_per_million=Decimal(2)
        )
        runs = []
        for _ in range(2):
            before, ledger = len(fake.requests), LedgerEntry.objects.count()
            started = time.perf_counter()
            ev = create_eval(project, user, deployment=deployment, benchmark=args.benchmark, seed=1)
            run_eval(ev.pk)
            wall = time.perf_counter() - started
            ev.refresh_from_db()
            runs.append((ev, wall, len(fake.requests) - before, LedgerEntry.objects.count() - ledger))
    (first, first_wall, first_sent, _), (again, wall, sent, ledger) = runs
    print(f"machine: {os.cpu_count()} CPUs; {args.benchmark}, {first.total:,} rows, {args.latency * 1000:.0f} ms per request")
    print(f"first run:  {first.status}, score {first.score:.4f}, {first_sent:,} requests, {first_wall:.2f} s, cost ${first.cost}")
    print(
        f"re-run:     {again.status}, score {again.score:.4f}, {sent:,} requests, {wall:.2f} s, cost ${again.cost}, "
        f"{again.cache_hits:,} hits / {again.cache_misses:,} misses, {ledger} ledger entries"
    )
    print(f"ratio re-run / first run: {wall / first_wall:.3f}   (targets: 0 requests, <= 2 s, $0)")
    if sent or again.score != first.score or again.cost:
        raise SystemExit("The re-run was not answered by the cache alone.")


if __name__ == "__main__":
    main()
