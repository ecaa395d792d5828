"""A finished 14,042-row MMLU cell reused by a new suite run: what it costs, and how its rows are best copied.

One finished suite cell of the whole of MMLU (every row stored: its prompt, an answer, a category) on a
deployment; then, --repeats times each, alternating:
- reuse: `create_suite_run` on that deployment, the whole path (the cell's key, the match, the reused
  eval and its 14,042 rows copied by one INSERT ... SELECT), from the call to its return;
- INSERT ... SELECT alone (`cells.copy_samples`) into a fresh eval;
- bulk_create from .values() in batches of --batch rows, the other way the rows could be copied;
- the run's key and match alone (no copy), forced (`force=True` makes the key, matches nothing).
Medians printed. No fake server: the deployment's /models is asked at a closed loopback port (refused at once).

Usage: .venv/bin/python bench/suite_cells.py [--repeats 5] [--batch 2000]   (~1 min here)
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from throwaway import throwaway_database  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=2000)
    args = parser.parse_args()
    os.environ["BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS"] = "1"
    with throwaway_database("belvedir_bench_cells"):
        from django.db import connection, transaction
        from django.utils import timezone

        from belvedir.core.actions import create_account
        from evals import queue
        from evals.benchmarks import mmlu
        from evals.models import Deployment, Eval, Sample
        from evals.suites import cells
        from evals.suites.actions import create_suite_run

        queue.enqueue = lambda ev: None  # nothing runs: the cells are finished or reused
        owner = create_account(username="bench", password="bench-pw-123", email="bench@example.com")
        project = owner.memberships.get().project
        deployment = Deployment.objects.create(project=project, name="d", base_url="http://127.0.0.1:9/v1", model="m")
        entries = [{"benchmark": "mmlu", "sample_limit": None}]
        first = create_suite_run(project, owner, suite_name="mmlu", entries=entries, deployments=[deployment], force=True)
        source = first.evals.get()
        rows = mmlu.BENCHMARK.rows()
        Sample.objects.bulk_create(
            [
                Sample(eval=source, row_index=i, input=row.input, output=f"Answer: {row.reference}", extracted=row.reference, reference=row.reference,
                       score=1.0, category=dict(row.categories), latency_ms=120.0, prompt_tokens=400, completion_tokens=3)
                for i, row in enumerate(rows)
            ],
            batch_size=2000,
        )  # fmt: skip
        now = timezone.now()
        Eval.objects.filter(pk=source.pk).update(status="succeeded", total=len(rows), done_count=len(rows), score=1.0, started_at=now, finished_at=now)
        source.refresh_from_db()
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE evals_sample")
            cursor.execute("SELECT pg_size_pretty(SUM(pg_column_size(s.*))) FROM evals_sample s WHERE eval_id = %s", [source.pk])
            size = cursor.fetchone()[0]
        print(f"source: eval #{source.pk}, {len(rows):,} rows, {size} of row data")

        def scratch() -> Eval:
            return Eval.objects.create(project=project, deployment=deployment, benchmark="mmlu", seed=1, status="succeeded")

        def insert_select():
            ev = scratch()
            with transaction.atomic():
                assert cells.copy_samples(ev, source)

        def bulk_from_values():
            ev = scratch()
            fields = [f.attname for f in Sample._meta.concrete_fields if not f.primary_key and f.attname != "eval_id"]
            with transaction.atomic():
                batch = []
                for values in Sample.objects.filter(eval_id=source.pk).values(*fields).iterator(chunk_size=args.batch):
                    batch.append(Sample(eval_id=ev.pk, **{**values, **dict.fromkeys(cells.UNSPENT), "created_at": now}))
                    if len(batch) == args.batch:
                        Sample.objects.bulk_create(batch)
                        batch = []
                Sample.objects.bulk_create(batch)

        def reuse():
            run = create_suite_run(project, owner, suite_name="mmlu", entries=entries, deployments=[deployment])
            assert run.evals.get().reused_from_id == source.pk

        def forced():
            create_suite_run(project, owner, suite_name="mmlu", entries=entries, deployments=[deployment], force=True)
            Eval.objects.filter(project=project, status="pending").update(status="cancelled")  # the project's active limit

        timings = {"reuse (create_suite_run)": [], "INSERT ... SELECT": [], f"bulk_create from .values() ({args.batch})": [], "key and match, forced": []}
        for _ in range(args.repeats):
            for (_name, times), step in zip(timings.items(), (reuse, insert_select, bulk_from_values, forced), strict=True):
                started = time.perf_counter()
                step()
                times.append(time.perf_counter() - started)
        for name, times in timings.items():
            print(f"{name:40s} median {statistics.median(times) * 1000:7.0f} ms  (min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f})")
        copied = Sample.objects.filter(eval__reused_from=source).count()
        print(f"{copied:,} rows copied into {Eval.objects.filter(reused_from=source).count()} reused cells; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
