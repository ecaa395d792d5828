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
`--run-key`: the process passes alternate between batches sent with a
project key and batches sent with a harness run's per-run key (whose run's
secrets are redacted from every span: bench/run_key.py), every span of
both in one session (a run's key writes only its run's), and print each
kind's median and their ratio: what redaction adds to storing.

Usage: .venv/bin/python bench/ingest_profile.py [--batches 20] [--profile] [--run-key]
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
from bench.run_key import SECRET_COUNT, make_run_key
from bench.throwaway import throwaway_database


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--spans", type=int, default=1000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--run-key", action="store_true", help="alternate project-key and run-key batches; print both")
    args = parser.parse_args()
    with throwaway_database("belvedir_bench_profile"):
        measure(args)


def measure(args):
    from django.db import connection
    from django.utils import timezone

    from belvedir.core.actions import create_account, ensure_default_project
    from belvedir.core.collector import collector_paused
    from traces import otlp
    from traces.batches import process_pending
    from traces.ingest import _row
    from traces.models import Span, TraceBatch

    user = create_account(username="bench", password=None)
    project = ensure_default_project(user)
    if args.run_key:
        return measure_run_key(args, project, user)
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


def measure_run_key(args, project, user):
    from unittest import mock

    from django.db import connection
    from django.utils import timezone

    from belvedir.core.collector import collector_paused
    from harnesses.redaction import redact_run_rows, run_secrets
    from traces import otlp, workload_keys
    from traces.batches import process_pending
    from traces.ingest import _row
    from traces.models import Span, TraceBatch

    run_id, key_id, _ = make_run_key(project, user)
    # (key, session, redacted): a run's key without redaction is today's
    # cost of a run's batch (its run looked up, its spans confined, its
    # session linked), so the last two differ by the redaction alone.
    # The last: every span's system prompt holds a backslash (escaped in
    # JSON: what JSON inside an attribute, or a Windows path, brings), which
    # could hide a secret from the body's scan, so its rows are scanned.
    kinds = {
        "project key": (None, "bench", True),
        "run key, not redacted": (key_id, str(run_id), False),
        "run key, redacted": (key_id, str(run_id), True),
        "run key, redacted, escapes": (key_id, str(run_id), True),
    }
    wall, cpu = {kind: [] for kind in kinds}, {kind: [] for kind in kinds}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    for b in range(-len(kinds), len(kinds) * args.batches):  # the first of each kind warms up (imports, partitions, plans), not counted
        kind = list(kinds)[b % len(kinds)]
        key, session, redacted = kinds[kind]
        body = make_body(b + len(kinds), args.spans, session=session)
        if kind.endswith("escapes"):
            body = body.replace(b"Answer briefly.", b"Answer briefly (C:\\\\tmp).")
        # As the request leaves it: a run's key's batch keeps the session the request found it may write.
        TraceBatch.objects.create(
            project=project,
            api_key_id=key,
            own_session=session if key else None,
            body=body,
            content_type="application/json",
            span_count=args.spans,
            received_at=timezone.now(),
        )
        with mock.patch("traces.workload_keys.redact", workload_keys.redact if redacted else lambda run, rows, source=None: rows):
            started, started_cpu = time.perf_counter(), time.process_time() + cpu_seconds(backend)
            assert process_pending() == 1
            if b >= 0:
                wall[kind].append(time.perf_counter() - started)
                cpu[kind].append(time.process_time() + cpu_seconds(backend) - started_cpu)
    assert Span.objects.count() == len(kinds) * (args.batches + 1) * args.spans, "every span stored"
    # The redaction on its own, per batch: the whole of it for a batch holding
    # no secret (its query, the scan of its body); the scans of its rows
    # instead (a body with escapes that could hide one); a batch holding one.
    redactor = run_secrets(run_id).redactor()
    now = timezone.now()
    clean = make_body(0, args.spans, session=str(run_id))
    leaky = clean.replace(b"Answer briefly.", next(iter(redactor.secrets)).encode(), 1)
    rows = {body: [_row(project.pk, raw, now) for raw in otlp.parse(body, "application/json").spans] for body in (clean, leaky)}
    with collector_paused():
        whole, scan, walk = [], [], []
        for _ in range(args.batches):
            started = time.perf_counter()
            assert redact_run_rows(run_id, rows[clean], clean) is rows[clean]
            whole.append(time.perf_counter() - started)
            started = time.perf_counter()
            assert redactor.values(rows[clean]) is rows[clean]
            scan.append(time.perf_counter() - started)
            started = time.perf_counter()
            assert redactor.values(rows[leaky], leaky) is not rows[leaky]
            walk.append(time.perf_counter() - started)

    per = 1000 / args.spans
    walls = {kind: statistics.median(times) * per * 1000 for kind, times in wall.items()}
    # CPU (this process and its PostgreSQL backend; a mean: /proc counts 10 ms ticks) moves far less than wall time on a shared machine.
    cpus = {kind: statistics.mean(times) * per * 1000 for kind, times in cpu.items()}
    print(f"{args.batches} batches of each kind, {args.spans} spans (~{len(body) / args.spans:.0f} B each), in turn; per 1,000 spans, a process pass's:")
    for kind in kinds:
        print(f"  {kind:22} wall {walls[kind]:6.1f} ms (median), CPU {cpus[kind]:6.1f} ms (mean, this process + its backend)")
    off = "run key, not redacted"
    for on in ("run key, redacted", "run key, redacted, escapes"):
        print(
            f"  {on}: redaction adds wall {walls[on] / walls[off]:.3f} x, CPU {cpus[on] / cpus[off]:.3f} x to a run key's batch "
            f"({SECRET_COUNT} secrets, {len(redactor._origins)} forms)"
        )
    print("  a project key's batch: nothing added (not scanned)")
    print(
        f"  the redaction alone, a batch holding no secret: {statistics.median(whole) * per * 1000:5.2f} ms (its query, the scan of its body); "
        f"{statistics.median(scan) * per * 1000:5.2f} ms scanning its rows instead (a body with escapes that could hide one); "
        f"a batch holding one: {statistics.median(walk) * per * 1000:5.1f} ms (the scans, then that span's strings masked)"
    )


if __name__ == "__main__":
    main()
