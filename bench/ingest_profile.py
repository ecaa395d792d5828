"""What storing one accepted 1,000-span batch costs, stage by stage, in one process.

`ingest.py` measures the whole pipeline under load; this isolates the
processor's share of it (what `process_trace_batches` does per batch) on the
same bodies, so a change to parsing, extraction or COPY shows up as
milliseconds per 1,000 spans rather than as noise in a shared machine's
throughput. Stages, each the median over `--batches` bodies:
- parse: decode and parse the OTLP/JSON body into span dicts;
- rows: parse plus building every row (extraction of columns and messages);
- process: the processor's whole pass (claim the batch, parse, extract,
  COPY, session upsert, delete the batch, commit), wall and this process's CPU,
  and its PostgreSQL backend's CPU (read from /proc: a local server).
`--profile` prints cProfile's top functions over the process passes.

Usage: .venv/bin/python bench/ingest_profile.py [--batches 20] [--profile]
Creates and drops a database `belvedir_bench_profile` (BENCH_DATABASE_NAME picks another).
"""

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cpu import cpu_seconds
from bench.ingest import make_body
from bench.throwaway import throwaway_database


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--spans", type=int, default=1000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with throwaway_database("belvedir_bench_profile"):
        measure(args)


def measure(args):
    from django.db import connection
    from django.utils import timezone

    from belvedir.core.actions import create_account, ensure_default_project
    from traces import otlp
    from traces.batches import process_pending
    from traces.ingest import _row, collector_paused
    from traces.models import Span, TraceBatch

    project = ensure_default_project(create_account(username="bench", password=None))
    bodies = [make_body(b, args.spans) for b in range(args.batches)]
    # A warm-up batch: first-use costs (imports, partitions, prepared types) are not storing.
    TraceBatch.objects.create(
        project=project, body=make_body(10_000, args.spans), content_type="application/json", span_count=args.spans, received_at=timezone.now()
    )
    process_pending()

    parse, rows = [], []
    with collector_paused():
        for body in bodies:
            started = time.perf_counter()
            parsed = otlp.parse(body, "application/json")
            parse.append(time.perf_counter() - started)
            now = timezone.now()
            started = time.perf_counter()
            parsed = otlp.parse(body, "application/json")
            [_row(project.pk, raw, now) for raw in parsed.spans]
            rows.append(time.perf_counter() - started)

    wall, cpu, database_cpu = [], [], []
    profiler = cProfile.Profile() if args.profile else None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    for body in bodies:
        TraceBatch.objects.create(project=project, body=body, content_type="application/json", span_count=args.spans, received_at=timezone.now())
        started, started_cpu, started_database = time.perf_counter(), time.process_time(), cpu_seconds(backend)
        if profiler:
            profiler.enable()
        assert process_pending() == 1
        if profiler:
            profiler.disable()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        database_cpu.append(cpu_seconds(backend) - started_database)
    assert Span.objects.count() == (args.batches + 1) * args.spans, "every span stored"

    per = 1000 / args.spans
    print(f"{args.batches} batches of {args.spans} spans (~{len(bodies[0]) / args.spans:.0f} B each); median per 1,000 spans:")
    print(f"  parse {statistics.median(parse) * per * 1000:6.1f} ms")
    print(f"  parse + rows (extract) {statistics.median(rows) * per * 1000:6.1f} ms")
    print(
        f"  process (parse, extract, COPY, sessions, commit): wall {statistics.median(wall) * per * 1000:6.1f} ms, this process's CPU {statistics.median(cpu) * per * 1000:6.1f} ms"
    )
    # A mean: /proc counts in 10 ms ticks.
    print(f"  its PostgreSQL backend's CPU for the pass: {statistics.mean(database_cpu) * per * 1000:6.1f} ms")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
