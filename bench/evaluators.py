"""Evaluators beside ingest: stored throughput with a code evaluator on every session against without, and the evaluator's lag.

The production setup of bench/ingest.py (gunicorn as configured, a
`process_trace_batches` per CPU, PostgreSQL), plus what scoring needs:
`manage.py segment_sessions` (sessions quiet after --quiet seconds) and an
eval worker cluster (`Q_CLUSTER_NAME=evals manage.py qcluster`, the ORM
broker). One code evaluator (contains) takes every session. Turns of
--requests requests (1,000 OpenLLMetry spans each, 20 sessions of 50 spans)
from --clients clients, in --rounds rounds, each round a turn with the
evaluator off and one with it on, in a rotating order (this machine's speed
drifts within minutes). Segmentation runs in both; the difference is the
evaluator. A turn's sessions go quiet while it runs (a turn lasts several
times --quiet), so most of their segmentation and scoring overlaps its
ingest; before the next turn the script waits until every session is
segmented. It prints each kind's stored spans/s (its spans over the time
until its last span was readable) and their ratio, then, once every session
of the "on" turns is scored, the evaluator's lag: from the moment a session
went quiet (its last span's arrival + --quiet) to its score, p50/p95/max.

Targets (issue #35): stored throughput with the evaluator >= 0.95 x without;
lag p95 < 60 s.

Usage: .venv/bin/python bench/evaluators.py [--requests 100] [--clients 4] [--rounds 2] [--quiet 3]
Creates and drops a database `belvedir_bench` (BENCH_DATABASE_NAME).
"""

import argparse
import os
import runpy
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ingest import (
    ADMIN_URL,
    DB_NAME,
    PORT,
    FreshnessWatcher,
    count_spans,
    drop_database,
    make_body,
    percentile,
    send_all,
    wait_for_autovacuum,
    wait_stored,
)  # noqa: E402

EVALUATOR = (
    "from belvedir.core.models import Membership; from traces.evaluator_rules import save_evaluator; m = Membership.objects.get();"
    " print(save_evaluator(m.project, m.user, {'name': 'mentions an order', 'kind': 'code', 'config': {'check': 'contains', 'expected': 'order'}}).pk)"
)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--processors", type=int, default=os.cpu_count())
    parser.add_argument("--spans", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quiet", type=int, default=3, help="seconds after its last span that a session is quiet (segmented, then scored)")
    args = parser.parse_args()
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DB_NAME}")
    database = f"{ADMIN_URL.rsplit('/', 1)[0]}/{DB_NAME}"
    env = {
        **os.environ,
        "DATABASE_URL": database,
        "DEBUG": "0",
        "SECRET_KEY": "bench-" + "x" * 40,
        "LOG_LEVEL": "WARNING",
        "ALLOWED_HOSTS": "127.0.0.1",
        "BELVEDIR_TRACE_QUIET_SECONDS": str(args.quiet),
        "BELVEDIR_TRACE_SEGMENT_EVERY_SECONDS": "1",
    }
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    key = subprocess.run(
        [python, "manage.py", "create_api_key", "bench", "--create"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    evaluator = int(
        subprocess.run([python, "manage.py", "shell", "-c", EVALUATOR], cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout.split()[-1]
    )
    workers = runpy.run_path(str(ROOT / "gunicorn.conf.py"))["workers"]
    started_processes = [
        subprocess.Popen([python, "-m", "gunicorn", "belvedir.wsgi", "-b", f"127.0.0.1:{PORT}", "--log-level", "warning"], cwd=ROOT, env=env),
        *(subprocess.Popen([python, "manage.py", "process_trace_batches"], cwd=ROOT, env=env) for _ in range(args.processors)),
        subprocess.Popen([python, "manage.py", "segment_sessions"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL),
        subprocess.Popen(
            [python, "manage.py", "qcluster"], cwd=ROOT, env={**env, "Q_CLUSTER_NAME": "evals"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ),
    ]
    url = f"http://127.0.0.1:{PORT}/api/v1/traces"
    proxied = {"X-Forwarded-Proto": "https"}
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **proxied}
    walls = {"off": [], "on": []}
    on_turns = []
    try:
        _ready(url, proxied)
        requests.post(url, data=make_body(10_000, args.spans), headers=headers, timeout=60).raise_for_status()  # warm-up, not counted
        wait_stored(database, args.spans)
        stored_before = count_spans(database)
        numbers = iter(range(100_000, 10**9, args.requests))
        for r in range(args.rounds):
            for kind in ("off", "on") if r % 2 == 0 else ("on", "off"):
                with psycopg.connect(database, autocommit=True) as conn:
                    conn.execute("UPDATE traces_evaluator SET enabled = %s WHERE id = %s", [kind == "on", evaluator])
                first = next(numbers)
                bodies = [make_body(first + b, args.spans) for b in range(args.requests)]
                watcher = FreshnessWatcher(database, [first + b for b in range(args.requests)])
                watcher.start()
                started = time.perf_counter()
                send_all(url, headers, bodies, args.clients, watcher)
                walls[kind].append(watcher.join() - started)
                stored = count_spans(database)
                assert stored - stored_before == args.requests * args.spans, f"{stored - stored_before} spans stored"
                stored_before = stored
                if kind == "on":
                    on_turns.append(first)
                # Every session of the turn segmented, and scored (or not), before the next turn switches the evaluator:
                # a score task still queued when an "off" turn begins would find it disabled and leave its sessions unscored.
                _segmented(database)
                _queue_drained(database)
                wait_for_autovacuum(database)
        batches = [first + b for first in on_turns for b in range(args.requests)]
        lags = _lags(database, evaluator, batches, len(batches) * (args.spans // 50), args.quiet)
    finally:
        for process in started_processes:
            process.terminate()
        for process in started_processes:
            process.wait(30)
    total = args.requests * args.spans
    rate = {kind: total * len(turns) / sum(turns) for kind, turns in walls.items()}
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; gunicorn {workers} workers, {args.processors} batch processors, "
        f"segment_sessions (quiet after {args.quiet} s), 1 eval worker cluster; {args.rounds} rounds of a turn per kind, each {args.requests} requests x {args.spans} "
        f"spans (20 sessions a request) from {args.clients} clients"
    )
    for kind in ("off", "on"):
        print(f"evaluator {kind:3}: stored {rate[kind]:7,.0f} spans/s (turns " + ", ".join(f"{total / w:,.0f}" for w in walls[kind]) + ")")
    print(f"with / without: {rate['on'] / rate['off']:.3f}   (target >= 0.95)")
    print(
        f"lag from quiet to scored, {len(lags)} sessions: p50 {percentile(lags, 0.5):.1f} s, p95 {percentile(lags, 0.95):.1f} s, max {max(lags):.1f} s   (target p95 < 60 s)"
    )
    drop_database()


def _ready(url, proxied):
    for _ in range(100):
        try:
            requests.get(url.replace("/api/v1/traces", "/login/"), headers=proxied, timeout=1)
            return
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.1)


def _segmented(database):
    _until_none(database, "SELECT EXISTS (SELECT 1 FROM traces_tracesession WHERE needs_processing)", "sessions were not segmented in time")


def _queue_drained(database):
    """The eval queue (django-q2's ORM broker) holds no task: each is deleted once its worker has done it."""
    _until_none(database, "SELECT EXISTS (SELECT 1 FROM django_q_ormq)", "the eval queue did not drain in time")


def _until_none(database, exists_query: str, failure: str, timeout=300):
    deadline = time.monotonic() + timeout
    with psycopg.connect(database, autocommit=True) as conn:
        while conn.execute(exists_query).fetchone()[0]:
            assert time.monotonic() < deadline, failure
            time.sleep(0.2)


def _lags(database, evaluator, batches, expected, quiet, timeout=300) -> list[float]:
    """Wait until the "on" turns' sessions (bench-<batch>-<n>) are all scored; each one's seconds from quiet to scored."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(database, autocommit=True) as conn:
        while True:
            rows = conn.execute(
                "SELECT EXTRACT(EPOCH FROM (sc.scored_at - (s.last_received_at + make_interval(secs => %s)))) FROM traces_evaluatorscore sc "
                "JOIN traces_tracesession s ON s.id = sc.session_id WHERE sc.evaluator_id = %s AND split_part(s.session_id, '-', 2)::int = ANY(%s)",
                [quiet, evaluator, batches],
            ).fetchall()
            if len(rows) >= expected or time.monotonic() > deadline:
                assert len(rows) >= expected, f"{len(rows)} of {expected} sessions scored in {timeout} s"
                return [max(0.0, float(lag)) for (lag,) in rows]
            time.sleep(1)


if __name__ == "__main__":
    main()
