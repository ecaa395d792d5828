"""Trace ingest throughput and freshness: the production setup against a direct COPY baseline.

Starts gunicorn as configured for production (gunicorn.conf.py, DEBUG off,
PostgreSQL) on 127.0.0.1 with `manage.py process_trace_batches` beside it
(one per CPU), sends realistic OpenLLMetry spans (about 2 KB each, 1,000 per
request) from one client and then from a few client threads, checks that
every span landed in the table, and prints:
- accepted spans per second and p50/p99 request latency (what clients wait);
- stored spans per second: until the last span is readable (end to end);
- freshness: from a request's answer to its spans being readable, p50/p99,
  watched by a thread polling the span table every 50 ms (WATCH_SECONDS).
In the same run, before each client count's turn and after it, it parses
the same bodies and COPYs the rows straight into a PostgreSQL table itself:
the ceiling each turn is measured against (the mean of the runs beside it).

`--run-key`: every request sent with a harness run's per-run key instead,
so that every batch is redacted for the run's secrets (bench/run_key.py),
every span in the run's session (a run's key writes only its own); run it
beside a plain run to see what redaction adds (and bench/ingest_profile.py
--run-key for the processor's share alone, less noisy).

`--redaction`: what redaction adds to stored throughput, in one run. Turns
of `--requests` requests at `--clients` clients, in `--rounds` rounds, each
round one turn of each kind in a rotating order (this machine's speed drifts
within minutes): plain batches (a project key), a run's key whose run has
nothing to redact (the run-key path alone: its request parses the body to
count foreign spans), and a run's key with 5 secrets (redacted; `--leaky N`:
N spans of each of its batches hold one of them). Every span of a kind in one
session, as a run's are. It prints each kind's stored spans/s (its spans over
the time until its last span was readable, summed over rounds) and the ratios.

Usage: .venv/bin/python bench/ingest.py [--requests 200] [--clients 4] [--processors N] [--run-key | --redaction [--rounds 3] [--leaky 0]]
Needs PostgreSQL on 127.0.0.1:5432 (trust or BENCH_DATABASE_ADMIN_URL); it
creates and drops a database `belvedir_bench`.
"""

import argparse
import json
import os
import random
import runpy
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cpu import children, cpu_seconds, postgres_processes  # noqa: E402

ADMIN_URL = os.environ.get("BENCH_DATABASE_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
DB_NAME = os.environ.get("BENCH_DATABASE_NAME", "belvedir_bench")
PORT = int(os.environ.get("BENCH_PORT", "8765"))


def make_body(batch: int, spans_per_request: int, session: str | None = None, leak: str = "", leaky: int = 0) -> bytes:
    """`session`: every span's session (a run's key writes only its run's); by default 50 spans per session.

    `leak`: a secret the first `leaky` spans send in a header attribute (redaction's slow path).
    """
    rng = random.Random(batch)
    spans = []
    for i in range(spans_per_request):
        start = 1_700_000_000_000_000_000 + (batch * spans_per_request + i) * 1_000_000
        question = " ".join(rng.choice(["plan", "email", "refund", "order", "weather", "summarise", "invoice", "ticket"]) for _ in range(60))
        attributes = {
            "traceloop.association.properties.session_id": session or f"bench-{batch}-{i // 50}",
            "traceloop.span.kind": "llm",
            "traceloop.workflow.name": "support_agent",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "You are a helpful support agent. Answer briefly.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": question,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": question[:300],
            "gen_ai.usage.prompt_tokens": 120 + i % 50,
            "gen_ai.usage.completion_tokens": 40 + i % 20,
            "llm.request.type": "chat",
        }
        if i < leaky:
            attributes["http.request.header.authorization"] = f"Bearer {leak}"
        spans.append(
            {
                # batch + 1: an all-zero trace or span id is invalid (and rejected).
                "traceId": f"{batch + 1:016x}{i // 50:016x}",
                "spanId": f"{batch + 1:08x}{i:08x}",
                "name": "openai.chat",
                "kind": 3,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(start + 850_000_000),
                "attributes": [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}} for k, v in attributes.items()],
                "status": {"code": 0},
            }
        )
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "bench"}}]},
                    "scopeSpans": [{"scope": {"name": "opentelemetry.instrumentation.openai"}, "spans": spans}],
                }
            ]
        }
    ).encode()


def direct_copy(bodies: list[bytes]) -> float:
    """Parse each body and COPY its spans into PostgreSQL ourselves: the baseline."""
    with psycopg.connect(f"{ADMIN_URL.rsplit('/', 1)[0]}/{DB_NAME}", autocommit=True) as conn:
        # No autovacuum: its ANALYZE of the rows written here would run during
        # the platform's turn, billing the platform for the baseline's table.
        conn.execute(
            "CREATE TABLE IF NOT EXISTS baseline_span (trace_id text, span_id text, name text, start_ns bigint, end_ns bigint, session_id text, attributes jsonb)"
            " WITH (autovacuum_enabled = false)"
        )
        conn.execute("TRUNCATE baseline_span")
        started = time.perf_counter()
        for body in bodies:
            document = json.loads(body)
            with conn.cursor().copy("COPY baseline_span FROM STDIN") as copy:
                for rs in document["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        for span in ss["spans"]:
                            attrs = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
                            copy.write_row(
                                (
                                    span["traceId"],
                                    span["spanId"],
                                    span["name"],
                                    int(span["startTimeUnixNano"]),
                                    int(span["endTimeUnixNano"]),
                                    attrs.get("traceloop.association.properties.session_id", ""),
                                    json.dumps(attrs),
                                )
                            )
        return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--processors", type=int, default=os.cpu_count(), help="process_trace_batches processes beside gunicorn")
    parser.add_argument("--spans", type=int, default=1000)
    parser.add_argument("--run-key", action="store_true", help="send with a harness run's per-run key (its secrets redacted from every batch)")
    parser.add_argument("--redaction", action="store_true", help="plain, run-key and redacted run-key turns in rotation; what redaction adds")
    parser.add_argument("--rounds", type=int, default=3, help="--redaction: rounds of one turn per kind")
    parser.add_argument("--leaky", type=int, default=0, help="--redaction: spans per redacted batch that hold a secret")
    args = parser.parse_args()

    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB_NAME}")
        admin.execute(f"CREATE DATABASE {DB_NAME}")
    env = {
        **os.environ,
        "DATABASE_URL": f"{ADMIN_URL.rsplit('/', 1)[0]}/{DB_NAME}",
        "DEBUG": "0",
        "SECRET_KEY": "bench-" + "x" * 40,
        "LOG_LEVEL": "WARNING",
        "ALLOWED_HOSTS": "127.0.0.1",
    }
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    key = subprocess.run(
        [python, "manage.py", "create_api_key", "bench", "--create"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    args.key_id, session = None, None
    if args.run_key:
        made = "from belvedir.core.models import Membership; from bench.run_key import make_run_key; m = Membership.objects.get(); print(*make_run_key(m.project, m.user))"
        run_id, args.key_id, key = subprocess.run(
            [python, "manage.py", "shell", "-c", made], cwd=ROOT, env=env, check=True, capture_output=True, text=True
        ).stdout.split()[-3:]
        session = run_id
    args.session = session
    kinds = []
    if args.redaction:
        made = (
            "from belvedir.core.models import Membership; from bench.run_key import make_plain_run_key, make_run_key; m = Membership.objects.get();"
            " print(*make_plain_run_key(m.user), *make_run_key(m.project, m.user), m.project_id)"
        )
        plain_run, _, plain_key, plain_project, run_id, _, run_key, project_id = subprocess.run(
            [python, "manage.py", "shell", "-c", made], cwd=ROOT, env=env, check=True, capture_output=True, text=True
        ).stdout.split()[-8:]
        # (name, key, session, project, the secret its batches send)
        kinds = [
            ("plain (project key)", key, "plain", int(project_id), ""),
            ("run key, nothing to redact", plain_key, plain_run, int(plain_project), ""),
            ("run key, 5 secrets (redacted)", run_key, run_id, int(project_id), run_key),
        ]
    # The production setup: gunicorn.conf.py from the repository root.
    workers = runpy.run_path(str(ROOT / "gunicorn.conf.py"))["workers"]
    server = subprocess.Popen([python, "-m", "gunicorn", "belvedir.wsgi", "-b", f"127.0.0.1:{PORT}", "--log-level", "warning"], cwd=ROOT, env=env)
    processors = [subprocess.Popen([python, "manage.py", "process_trace_batches"], cwd=ROOT, env=env) for _ in range(args.processors)]
    # Each client count sends its own spans: re-sent spans are skipped
    # without being written, which would flatter the second run.
    client_counts = sorted({1, args.clients})
    bodies = {clients: [make_body(n * args.requests + b, args.spans, session=session) for b in range(args.requests)] for n, clients in enumerate(client_counts)}
    span_bytes = len(bodies[1][0]) / args.spans
    try:
        url = f"http://127.0.0.1:{PORT}/api/v1/traces"
        # As from the TLS proxy production puts in front of gunicorn: without
        # it, DEBUG off redirects every request to https (SECURE_SSL_REDIRECT).
        proxied = {"X-Forwarded-Proto": "https"}
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **proxied}
        for _ in range(100):
            try:
                requests.get(f"http://127.0.0.1:{PORT}/login/", headers=proxied, timeout=1)
                break
            except (requests.ConnectionError, requests.Timeout):  # starting, or slow to answer its first request
                time.sleep(0.1)
        # Warm-up on a body that is not counted.
        requests.post(url, data=make_body(10_000, args.spans, session=session), headers=headers, timeout=60).raise_for_status()
        wait_stored(env["DATABASE_URL"], args.spans)
        if args.redaction:
            measure_redaction(args, env, url, proxied, kinds, server, processors, workers)
            return
        # The baseline before each client count's turn and after it, and each
        # turn measured against the two beside it: this machine's speed drifts
        # within minutes (other people's work on the same host). A ratio
        # against one end of the run swung by a quarter, and one against the
        # ends of both turns by 15 %.
        baselines = [direct_copy(bodies[1])]
        results = {}
        stored_before = count_spans(env["DATABASE_URL"])
        for n, clients in enumerate(client_counts):
            watcher = FreshnessWatcher(env["DATABASE_URL"], [n * args.requests + b for b in range(args.requests)])
            watcher.start()
            cpu_before = cpu_by_part(server, processors)
            started = time.perf_counter()
            wall, latencies, refused = send_all(url, headers, bodies[clients], clients, watcher)
            stored_wall = watcher.join() - started
            cpu = cpu_used(cpu_before, cpu_by_part(server, processors))
            stored = count_spans(env["DATABASE_URL"])
            assert stored - stored_before == args.requests * args.spans, f"{stored - stored_before} spans stored, {args.requests * args.spans} sent"
            stored_before = stored
            results[clients] = (wall, latencies, refused, stored_wall, watcher.freshness(), cpu)
            wait_for_autovacuum(env["DATABASE_URL"])
            baselines.append(direct_copy(bodies[1]))
        for process in processors:
            process.terminate()
            process.wait(20)
        drain_rate = processing_capacity(env, args, len(client_counts) * args.requests)
    finally:
        for process in [server, *processors]:
            process.terminate()
        for process in [server, *processors]:
            process.wait(20)
        if args.redaction:
            drop_database()

    total = args.requests * args.spans
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; gunicorn {workers} workers, {args.processors} batch processors; {args.requests} requests x "
        f"{args.spans} spans of ~{span_bytes:.0f} B per client count, every span counted in the table after"
        + ("; sent with a harness run's key: every batch redacted for its secrets, every span in its session" if args.run_key else "")
    )
    for n, (clients, (wall, latencies, refused, stored_wall, freshness, cpu)) in enumerate(results.items()):
        rate, stored_rate = total / wall, total / stored_wall
        # This turn's baseline: the runs just before it and just after it.
        baseline_rate = total / ((baselines[n] + baselines[n + 1]) / 2)
        print(
            f"platform, {clients} client(s), against a baseline of {baseline_rate:,.0f} spans/s: accepted {rate:7,.0f} spans/s ({rate / baseline_rate:.2f} x baseline), "
            f"p50 {percentile(latencies, 0.5) * 1000:4.0f} ms, p99 {percentile(latencies, 0.99) * 1000:4.0f} ms per request "
            f"({refused} of {len(latencies)} answered 503 + Retry-After and sent again); "
            f"stored {stored_rate:7,.0f} spans/s ({stored_rate / baseline_rate:.2f} x); "
            f"readable after the answer: p50 {percentile(freshness, 0.5) * 1000:4.0f} ms, p99 {percentile(freshness, 0.99) * 1000:4.0f} ms"
        )
        print(
            "  CPU per 1,000-span request, ms: "
            + ", ".join(f"{part} {seconds * 1000 / args.requests * 1000 / args.spans:.0f}" for part, seconds in cpu.items())
        )
    mean_rate = total / (sum(baselines) / len(baselines))
    print(
        f"processing capacity: {args.processors} processors drained a backlog of {DRAIN_BATCHES} batches at {drain_rate:7,.0f} spans/s "
        f"({drain_rate / mean_rate:.2f} x the mean baseline), no requests arriving"
    )
    print(
        f"baseline (parse + COPY in this script, 1 connection): {mean_rate:7,.0f} spans/s on average; "
        + ", then ".join(f"{total / seconds:,.0f}" for seconds in baselines)
        + " (before the first turn, then after each)"
    )
    print("targets: p99 < 300 ms per 1,000-span request; throughput >= 0.9 x baseline; spans readable < 2 s after the answer at p99")
    drop_database()


def drop_database():
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


def measure_redaction(args, env, url, proxied, kinds, server, processors, workers):
    """Turns of each kind in rotation; each kind's stored spans/s over all its turns, and the ratios between kinds."""
    database = env["DATABASE_URL"]
    for name, key, session, _, leak in kinds[1:]:  # each key's first request, not counted (the project key's is done)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **proxied}
        requests.post(url, data=make_body(10_001 + len(name), args.spans, session=session, leak=leak, leaky=args.leaky), headers=headers, timeout=60)
        wait_stored(database, 0)
    baseline_bodies = [make_body(20_000 + b, args.spans) for b in range(args.requests)]
    baselines = [direct_copy(baseline_bodies)]
    spent = {name: [] for name, *_ in kinds}  # per turn: (stored wall, cpu)
    numbers = iter(range(100_000, 10**9, args.requests))
    stored_before = count_spans(database)
    for r in range(args.rounds):
        for name, key, session, project, leak in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
            first = next(numbers)
            bodies = [make_body(first + b, args.spans, session=session, leak=leak, leaky=args.leaky) for b in range(args.requests)]
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **proxied}
            watcher = FreshnessWatcher(database, [first + b for b in range(args.requests)], project)
            watcher.start()
            cpu_before = cpu_by_part(server, processors)
            started = time.perf_counter()
            send_all(url, headers, bodies, args.clients, watcher)
            stored_wall = watcher.join() - started
            cpu = cpu_used(cpu_before, cpu_by_part(server, processors))
            stored = count_spans(database)
            assert stored - stored_before == args.requests * args.spans, f"{name}: {stored - stored_before} spans stored, {args.requests * args.spans} sent"
            stored_before = stored
            spent[name].append((stored_wall, cpu))
            wait_for_autovacuum(database)
    baselines.append(direct_copy(baseline_bodies))
    total = args.requests * args.spans
    baseline_rate = total / (sum(baselines) / len(baselines))
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; gunicorn {workers} workers, {args.processors} batch processors; "
        f"{args.rounds} rounds of a turn per kind, each {args.requests} requests x {args.spans} spans from {args.clients} clients, every span counted in the table after"
        + (f"; {args.leaky} spans of each redacted batch hold a secret" if args.leaky else "; no batch holds a secret (the usual case)")
    )
    rates = {}
    for name, turns in spent.items():
        rates[name] = [total / wall for wall, _ in turns]
        overall = total * len(turns) / sum(wall for wall, _ in turns)
        cpu = {
            part: sum(c[part] for _, c in turns) * 1000 / (args.requests * len(turns)) * 1000 / args.spans
            for part in ("gunicorn", "processors", "postgres", "machine")
        }
        print(
            f"{name:31}: stored {overall:7,.0f} spans/s ({overall / baseline_rate:.2f} x baseline; turns "
            + ", ".join(f"{rate:,.0f}" for rate in rates[name])
            + "); CPU per 1,000-span request, ms: "
            + ", ".join(f"{part} {ms:.0f}" for part, ms in cpu.items())
        )
    names = [name for name, *_ in kinds]

    def ratio(a, b) -> str:
        overall = sum(total / x for x in rates[b]) / sum(total / x for x in rates[a])  # spans over time, both sides the same spans
        per_round = [x / y for x, y in zip(rates[a], rates[b], strict=True)]
        return f"{overall:.3f} (per round {min(per_round):.3f}-{max(per_round):.3f})"

    print(f"redacted run key / plain:                  {ratio(names[2], names[0])}")
    print(f"redacted run key / run key with nothing to redact: {ratio(names[2], names[1])}  <- what redaction itself adds")
    print(f"run key with nothing to redact / plain:    {ratio(names[1], names[0])}  <- the run-key request path")
    print(
        f"baseline (parse + COPY in this script, 1 connection): {baseline_rate:,.0f} spans/s; "
        + ", then ".join(f"{total / x:,.0f}" for x in baselines)
        + " (before, after)"
    )
    print("target: redaction adds under 5 % (redacted / plain >= 0.95)")


def cpu_by_part(server, processors) -> dict[str, float | dict[int, float]]:
    """CPU seconds so far of gunicorn's workers, the processors, PostgreSQL (per process), this script (clients and watcher) and the machine.

    `stolen`: time the hypervisor ran another guest while this machine had
    work for its CPUs.
    """
    with open("/proc/stat") as stat:
        # user nice system idle iowait irq softirq steal
        ticks = [int(n) for n in stat.readline().split()[1:9]]
    return {
        "gunicorn": {pid: cpu_seconds(pid) for pid in children(server.pid)},
        "processors": {process.pid: cpu_seconds(process.pid) for process in processors},
        "postgres": {pid: cpu_seconds(pid) for pid in postgres_processes()},
        "bench": sum(os.times()[:2]),
        # All but idle and iowait (a CPU waiting on the disk, free to run anything else).
        "machine": (sum(ticks[:7]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK"),
        "stolen": ticks[7] / os.sysconf("SC_CLK_TCK"),
    }


def cpu_used(before, after) -> dict[str, float]:
    """CPU seconds each part used between two `cpu_by_part`s.

    Per process where processes come and go (PostgreSQL's backends and
    autovacuum workers): a process gone by the end has its time lost either
    way, and subtracting what it had at the start read as the platform using
    less than nothing (a 1-client turn's PostgreSQL at 9 ms per request).
    """
    return {
        part: sum(seconds - before[part].get(pid, 0.0) for pid, seconds in now.items()) if isinstance(now, dict) else now - before[part]
        for part, now in after.items()
    }


def count_spans(database_url) -> int:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT count(*) FROM traces_span").fetchone()[0]


DRAIN_BATCHES = 40


def processing_capacity(env, args, first_batch) -> float:
    """Spans/s the processors store from a backlog, with nothing else asking for the CPU."""
    python = sys.executable
    processors = [
        # At the baseline's own priority: nothing else runs here to yield to.
        subprocess.Popen([python, "manage.py", "process_trace_batches", "--nice", "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(args.processors)
    ]
    try:
        for process in processors:
            process.stdout.readline()  # ready
        before = count_spans(env["DATABASE_URL"])
        with psycopg.connect(env["DATABASE_URL"]) as conn:
            project = conn.execute("SELECT id FROM core_project ORDER BY id LIMIT 1").fetchone()[0]
            columns = "project_id, api_key_id, body, content_type, content_encoding, span_count, received_at"
            with conn.cursor().copy(f"COPY traces_tracebatch ({columns}) FROM STDIN") as copy:
                for n in range(DRAIN_BATCHES):
                    copy.write_row(
                        [project, args.key_id, make_body(first_batch + n, args.spans, session=args.session), "application/json", "", args.spans, "now"]
                    )
            # As accept() does: idle processors wake on the commit, not at their next look.
            conn.execute("SELECT pg_notify('trace_batches', '')")
        started = time.perf_counter()
        wait_stored(env["DATABASE_URL"], before + DRAIN_BATCHES * args.spans)
        return DRAIN_BATCHES * args.spans / (time.perf_counter() - started)
    finally:
        for process in processors:
            process.terminate()
            process.wait(20)


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def wait_for_autovacuum(database_url, timeout=30):
    """Let autovacuum finish with the platform's new rows: a baseline run beside it would pay for it."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(database_url, autocommit=True) as conn:
        busy = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND datname = current_database()"
        while conn.execute(busy).fetchone()[0] and time.monotonic() < deadline:
            time.sleep(0.1)


def wait_stored(database_url, count, timeout=120):
    """Wait until no accepted batch is left waiting, then check that `count` spans are stored.

    A batch's row goes in the transaction that stores its spans, so an empty
    batch table means everything accepted is readable. Polling that small
    table costs the server nothing; polling count(*) of a few hundred
    thousand spans every 50 ms took much of a core from the processors
    being measured.
    """
    deadline = time.monotonic() + timeout
    with psycopg.connect(database_url, autocommit=True) as conn:
        while conn.execute("SELECT EXISTS (SELECT 1 FROM traces_tracebatch)").fetchone()[0]:
            assert time.monotonic() < deadline, "spans were not stored in time"
            time.sleep(0.02)
    stored = count_spans(database_url)
    assert stored >= count, f"{stored} spans stored, {count} expected"


# How often the freshness watcher looks. Its probes are PostgreSQL work the
# platform's turn is billed for and the baseline is not: every 20 ms they
# took ~1.5-1.9 ms of PostgreSQL per request, ~2 % of the machine's CPU.
# A reading is at most this late, against a target of 2 s.
WATCH_SECONDS = 0.05


class FreshnessWatcher(threading.Thread):
    """Notes when each batch's spans become readable, by the first trace id of each body (the unique constraint's index)."""

    def __init__(self, database_url, batch_numbers, project: int | None = None):
        super().__init__(daemon=True)
        self.database_url = database_url
        self.project = project  # the batches' project (the first one by default)
        self.trace_of = {f"{b + 1:016x}{0:016x}": b for b in batch_numbers}
        self.answered: dict[int, float] = {}
        self.readable: dict[int, float] = {}
        self.lock = threading.Lock()

    def answered_at(self, batch, moment):
        with self.lock:
            self.answered[batch] = moment

    def run(self):
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            project = self.project or conn.execute("SELECT id FROM core_project ORDER BY id LIMIT 1").fetchone()[0]
            while len(self.readable) < len(self.trace_of):
                # Only batches already answered: probing the ones not yet
                # sent (all of them, at first) would be PostgreSQL work the
                # platform is billed for and the baseline is not.
                with self.lock:
                    waiting = [t for t, b in self.trace_of.items() if b in self.answered and b not in self.readable]
                # One index probe per waiting trace, stopping at its first
                # span: the watcher must not take the CPU it is measuring
                # (a DISTINCT over each trace's 50 spans every look took
                # a third of a core). LATERAL ... LIMIT 1 keeps it a probe:
                # an EXISTS became a semi-join that PostgreSQL, with no
                # statistics yet on a new partition, ran as a scan of every
                # stored span on each look (two thirds of a core).
                rows = conn.execute(
                    "SELECT t FROM unnest(%s::text[]) AS t, LATERAL (SELECT 1 FROM traces_span WHERE project_id = %s AND trace_id = t LIMIT 1) AS found",
                    [waiting, project],
                ).fetchall()
                now = time.perf_counter()
                for (trace,) in rows:
                    self.readable[self.trace_of[trace]] = now
                time.sleep(WATCH_SECONDS)
        self.done = time.perf_counter()

    def join(self, timeout=None):
        super().join(timeout)
        return self.done

    def freshness(self) -> list[float]:
        # A batch seen before its answer reached the client counts as 0.
        return [max(0.0, self.readable[b] - self.answered[b]) for b in self.answered]


def send_all(url, headers, bodies, clients, watcher):
    """Post every body once from `clients` threads; (wall seconds, per-request latencies, refusals)."""
    latencies: list[float] = []
    refusals: list[float] = []
    queue = list(range(len(bodies)))
    numbers = sorted(watcher.trace_of.values())
    lock = threading.Lock()

    def client():
        session = requests.Session()
        while True:
            with lock:
                if not queue:
                    return
                index = queue.pop()
            while True:
                started = time.perf_counter()
                response = session.post(url, data=bodies[index], headers=headers, timeout=60)
                answered = time.perf_counter()
                with lock:
                    latencies.append(answered - started)
                if response.status_code != 503:
                    break
                # Storage is behind: wait as told, as OTLP exporters do.
                with lock:
                    refusals.append(answered)
                time.sleep(float(response.headers.get("Retry-After", "1")))
            response.raise_for_status()
            watcher.answered_at(numbers[index], answered)

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started, latencies, len(refusals)


if __name__ == "__main__":
    main()
