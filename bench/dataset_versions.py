"""Versioned datasets: what a version costs to make, store and read, against a dataset that has one version.

A 95,000-row dataset goes through 100 versions (ending under the 100,000-row limit), each editing 100 rows,
adding 100 and removing 50 (evals/datasets/versions.py). Then, 5 times each
(median): every row of its first and of its latest version, a page of 100
rows deep in the latest (the API's cursor), and diffs; against the same reads
of a dataset of the latest version's rows in one version (the floor: what a
table without versions would answer). Storage: the rows stored, against what
a copy per version would store. In a throwaway PostgreSQL database.

Usage: .venv/bin/python bench/dataset_versions.py [--rows 95000] [--versions 100]
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.throwaway import throwaway_database  # noqa: E402


def timed(fn, repeat=5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=95_000)
    parser.add_argument("--versions", type=int, default=100)
    args = parser.parse_args()
    with throwaway_database("belvedir_bench_datasets"):
        measure(args)


def measure(args):
    from django.db import connection

    from belvedir.core.actions import create_account
    from evals.datasets.versions import _change, diff, new_dataset, rows_at
    from evals.models import DatasetRow, DatasetVersion

    user = create_account(username="bench", password=None)
    project = user.memberships.get().project
    rng = random.Random(7)
    started = time.perf_counter()
    dataset = new_dataset(project, user, "versioned", [{"input": f"question {i} " * 8, "expected": f"answer {i}"} for i in range(args.rows)], "bench")
    print(f"version 1: {args.rows:,} rows in {time.perf_counter() - started:.1f} s")
    change_times, next_row = [], args.rows
    for n in range(2, args.versions + 1):
        live = list(rows_at(dataset).values_list("position", flat=True))
        chosen = rng.sample(live, 150)
        edits = {p: {"input": f"question {p} edited in v{n}", "expected": "edited", "input_format": "text", "metadata": {}} for p in chosen[:100]}
        added = [{"input": f"question {next_row + i} " * 8, "expected": "new", "input_format": "text", "metadata": {}} for i in range(100)]
        next_row += 100
        started = time.perf_counter()
        _change(dataset, user, f"bench v{n}", add=added, edit=edits, remove=chosen[100:])
        change_times.append((time.perf_counter() - started) * 1000)
    latest = [{"input": r.input, "expected": r.expected} for r in rows_at(dataset)]
    flat = new_dataset(project, user, "flat", latest, "bench")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE evals_datasetrow")
    stored = DatasetRow.objects.filter(dataset=dataset).count()
    copies = sum(DatasetVersion.objects.filter(dataset=dataset).values_list("row_count", flat=True))
    print(
        f"{args.versions} versions of 100 edits, 100 additions, 50 removals: one change p50 {statistics.median(change_times):.0f} ms, max {max(change_times):.0f} ms"
    )
    print(f"rows stored {stored:,}; a copy per version would store {copies:,} ({copies / stored:.0f} ×)")
    deep = dataset.row_count * 9 // 10

    def read(ds, number=None):
        return lambda: list(rows_at(ds, number).values_list("position", "input", "expected"))

    def page(ds):
        after = rows_at(ds).values_list("position", flat=True)[deep]
        return lambda: list(rows_at(ds).filter(position__gt=after)[:100])

    print(f"{'read':52} {'versioned ms':>13} {'one version ms':>15}")
    for label, versioned, floor in [
        (f"every row of version 1 ({args.rows:,})", read(dataset, 1), read(flat)),
        (f"every row of version {dataset.version} ({dataset.row_count:,})", read(dataset), read(flat)),
        ("a page of 100 rows, 90 % of the way in", page(dataset), page(flat)),
    ]:
        print(f"{label:52} {timed(versioned):13.1f} {timed(floor):15.1f}")
    print(f"diff of the latest version against the one before: {timed(lambda: diff(dataset, dataset.version)):.1f} ms")
    print(f"diff of the latest version against version 1: {timed(lambda: diff(dataset, dataset.version, base=1)):.1f} ms")
    sql, params = rows_at(dataset, 1).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        print("plan of version 1's rows:", " / ".join(line.strip() for (line,) in cursor.fetchall()))


if __name__ == "__main__":
    main()
