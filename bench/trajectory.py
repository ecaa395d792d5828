"""The trajectory of a 10,000-span session, page by page, and the diff of two 1,000-step sessions.

Fills a throwaway PostgreSQL database (`belvedir_bench_trajectory`) in bulk
with SQL: one session of 10,000 spans (an agent loop: LLM call, tool call,
LLM call, with messages of ~2 KB and an error every 97th step) and two
sessions of 1,000 steps that differ here and there (another tool every 10th
step, a step dropped every 37th). Then requests through Django's test
client (no network), 20 times each after a warm-up, printing p50/p95 and
SQL queries:

- the session page and the steps API: the first page, a page 9,000 steps
  in (by its cursor), and the filters (tool steps, errors only, a search);
- the diff page and API of the two 1,000-step sessions.

Baselines, measured in the same run: for a page of steps, the page's own
keyset query run bare (what no Python could beat); for the diff, reading the
two sessions' steps alone (what the alignment and the comparison add to).
Targets: p95 < 300 ms per page of steps; the diff < 1 s.

Usage: .venv/bin/python bench/trajectory.py [--spans 10000] [--diff-steps 1000] [--repeat 20]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.throwaway import throwaway_database  # noqa: E402

SPANS_SQL = """
INSERT INTO traces_span (project_id, trace_id, span_id, parent_span_id, name, kind, start_time, end_time, start_unix_nano,
       end_unix_nano, status_code, status_message, attributes, events, resource, scope, session_id, user_id, span_kind,
       workflow_name, model, prompt, completion, input_tokens, output_tokens, latency_ms, received_at)
SELECT %(project)s, lpad(to_hex(%(seed)s::bigint), 32, '0'), lpad(to_hex(%(seed)s::bigint * 100000 + i), 16, '0'), '',
       CASE WHEN i %% 3 = 1 THEN tool || '.tool' ELSE 'openai.chat' END, 3,
       base + (i * 100 || ' ms')::interval, base + (i * 100 + 80 || ' ms')::interval,
       (extract(epoch FROM base) * 1e9)::bigint + i::bigint * 100000000, (extract(epoch FROM base) * 1e9)::bigint + i::bigint * 100000000 + 80000000,
       CASE WHEN i %% 97 = 0 THEN 2 ELSE 0 END, CASE WHEN i %% 97 = 0 THEN 'rate limited' ELSE '' END,
       CASE WHEN i %% 3 = 1 THEN jsonb_build_object('traceloop.entity.name', tool, 'traceloop.span.kind', 'tool')
            ELSE jsonb_build_object('gen_ai.request.model', 'gpt-4o-mini', 'gen_ai.usage.prompt_tokens', 900, 'llm.request.type', 'chat') END,
       '[]', '{"service.name": "bench"}', 'openllmetry', %(session)s, '',
       CASE WHEN i %% 3 = 1 THEN 'tool' ELSE 'llm' END, '', CASE WHEN i %% 3 = 1 THEN '' ELSE 'gpt-4o-mini' END,
       CASE WHEN i %% 3 = 1 THEN jsonb_build_array(jsonb_build_object('role', 'input', 'content', '{"path": "src/file' || i || '.py"}'))
            ELSE jsonb_build_array(jsonb_build_object('role', 'system', 'content', repeat('You are a coding agent. ', 20)),
                                   jsonb_build_object('role', 'user', 'content', 'Fix issue ' || %(seed)s::text || ': ' || repeat('words ', 100)),
                                   jsonb_build_object('role', 'tool', 'tool_call_id', 'call_' || i, 'content', repeat('output ', 80))) END,
       CASE WHEN i %% 3 = 1 THEN jsonb_build_array(jsonb_build_object('role', 'output', 'content', repeat('line of a file ', 40)))
            ELSE jsonb_build_array(jsonb_build_object('role', 'assistant', 'content', 'Step ' || i || ': ' || repeat('thinking ', 30),
                 'tool_calls', jsonb_build_array(jsonb_build_object('id', 'call_' || i, 'name', tool, 'arguments', '{"path": "src/file' || i || '.py"}')))) END,
       CASE WHEN i %% 3 = 1 THEN NULL ELSE 900 END, CASE WHEN i %% 3 = 1 THEN NULL ELSE 120 END, 80, now()
FROM (SELECT i, now() - interval '3 hours' AS base,
             'tool_' || CASE WHEN %(vary)s AND i %% 10 = 1 THEN (i * 3) %% 5 ELSE i %% 5 END AS tool
      FROM generate_series(0, %(count)s - 1) AS i WHERE NOT (%(vary)s AND i %% 37 = 5)) AS steps
"""


def fill(url, project_id, spans, diff_steps):
    with psycopg.connect(url, autocommit=True) as conn:
        for seed, session, count, vary in ((1, "long", spans, False), (2, "run-a", diff_steps, False), (3, "run-b", diff_steps, True)):
            conn.execute(SPANS_SQL, {"project": project_id, "seed": seed, "session": session, "count": count, "vary": vary})
            conn.execute(
                """INSERT INTO traces_tracesession (project_id, session_id, first_span_at, last_span_at, span_count, input_tokens, output_tokens,
                       outcome, needs_processing, last_received_at, user_id, metadata)
                   SELECT project_id, session_id, min(start_time), max(end_time), count(*), coalesce(sum(input_tokens), 0),
                          coalesce(sum(output_tokens), 0), '', false, now(), '', '{}'
                   FROM traces_span WHERE project_id = %s AND session_id = %s GROUP BY project_id, session_id""",
                (project_id, session),
            )
        conn.execute("ANALYZE")


def timed(client, path, repeat, headers=None):
    """Wall times (ms), the Django process's own CPU times (ms: what a shared machine's load does not inflate), and queries."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    headers = headers or {}
    warm = client.get(path, headers=headers)
    assert warm.status_code == 200, (path, warm.status_code, warm.content[:300])  # warm-up, not counted: template compilation, first plans
    times, cpu = [], []
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as queries:
            started, started_cpu = time.perf_counter(), time.process_time()
            response = client.get(path, headers=headers)
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    return times, cpu, len(queries)


def p95(times):
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def bare_page_query(session, after, repeat):
    """The keyset query of a page of steps, run on its own: the floor under the page."""
    from traces import trajectory

    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        trajectory.steps_page(session, {"after": after} if after else {}, prices={})
        times.append((time.perf_counter() - started) * 1000)
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=10_000)
    parser.add_argument("--diff-steps", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    # In-process requests over plain HTTP: production's redirect to HTTPS would answer them all 301.
    os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
    with throwaway_database("belvedir_bench_trajectory") as url:
        measure(url, args)


def measure(url, args):
    from django.test import Client
    from rest_framework.test import APIClient

    from belvedir.core.actions import create_account
    from belvedir.core.models import ApiKey
    from traces import diff, trajectory
    from traces.models import TraceSession

    user = create_account(username="bench", password=None)
    project = user.memberships.get().project
    started = time.perf_counter()
    fill(url, project.pk, args.spans, args.diff_steps)
    long = TraceSession.objects.get(project=project, session_id="long")
    print(f"filled a {long.span_count:,}-span session and two of {args.diff_steps:,} steps in {time.perf_counter() - started:.1f} s")

    web = Client(SERVER_NAME="localhost")
    web.force_login(user)
    api = APIClient(SERVER_NAME="localhost")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiKey.issue(project=project, user=user, name='bench')[1]}")
    # The cursor of the page that starts 9,000 steps in, as "load more" would have reached it.
    deep_steps, _ = trajectory.steps_page(long, {}, size=min(9_000, args.spans - 50), prices={})
    last = deep_steps[-1].span
    deep = f"{last.start_unix_nano}.{last.span_id}.{len(deep_steps) + 1}"
    htmx = {"HX-Request": "true"}
    # (label, client, path, headers, the bare query it compares with: a cursor, or nothing for filtered pages)
    pages = [
        ("session page, first 50 steps", web, "/traces/sessions/long/", None, ""),
        ("session page, 50 steps 9,000 in (cursor)", web, f"/traces/sessions/long/?after={deep}", None, deep),
        ("session page, load more (htmx partial), 9,000 in", web, f"/traces/sessions/long/?after={deep}", htmx, deep),
        ("session page, tool steps only", web, "/traces/sessions/long/?kind=tool", None, None),
        ("session page, errors only", web, "/traces/sessions/long/?errors=1", None, None),
        ("session page, search (rare text)", web, "/traces/sessions/long/?q=file9999.py", None, None),
        ("steps API, first 50", api, "/api/v1/sessions/long/steps", None, ""),
        ("steps API, 50 steps 9,000 in (cursor)", api, f"/api/v1/sessions/long/steps?after={deep}", None, deep),
        ("steps API, tool steps only", api, "/api/v1/sessions/long/steps?kind=tool", None, None),
        ("steps API, errors only", api, "/api/v1/sessions/long/steps?errors=1", None, None),
    ]
    floor = {cursor: statistics.median(bare_page_query(long, cursor, args.repeat)) for cursor in ("", deep)}
    print(f"{'page':52} {'p50 ms':>8} {'p95 ms':>8} {'CPU p50':>8} {'queries':>8} {'p50 / bare query':>17}")
    worst = 0.0
    for label, client, path, headers, cursor in pages:
        times, cpu, queries = timed(client, path, args.repeat, headers)
        worst = max(worst, p95(times))
        ratio = "" if cursor is None else f"{statistics.median(times) / floor[cursor]:.2f} ×"
        print(f"{label:52} {statistics.median(times):8.1f} {p95(times):8.1f} {statistics.median(cpu):8.1f} {queries:8d} {ratio:>17}")
    print(f"bare keyset query + steps (no view): first page {floor['']:.1f} ms, 9,000 in {floor[deep]:.1f} ms")
    print(f"worst p95 per page of steps {worst:.1f} ms (target < 300 ms): {'met' if worst < 300 else 'NOT met'}")

    a, b = (TraceSession.objects.get(project=project, session_id=s) for s in ("run-a", "run-b"))
    read, whole = [], []
    result = None
    for _ in range(max(args.repeat // 2, 3)):
        started = time.perf_counter()
        prices = trajectory.model_prices(project.pk)
        trajectory.all_steps(a, diff.MAX_DIFF_STEPS, prices), trajectory.all_steps(b, diff.MAX_DIFF_STEPS, prices)
        read.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        result = diff.diff(a, b)
        whole.append((time.perf_counter() - started) * 1000)
    changed = sum(row["status"] != diff.SAME for row in result["rows"])
    print(
        f"diff of {a.span_count:,} and {b.span_count:,} steps: {len(result['rows']):,} rows, {changed} not the same, first divergence at row {result['first_divergence'] + 1}"
    )
    print(f"{'diff':52} {'p50 ms':>8} {'p95 ms':>8} {'CPU p50':>8} {'queries':>8} {'p50 / reading':>17}")
    label = "diff() (read, align, compare, totals)"
    print(f"{label:52} {statistics.median(whole):8.1f} {p95(whole):8.1f} {'':>8} {'':>8} {statistics.median(whole) / statistics.median(read):15.2f} ×")
    slowest = p95(whole)
    for label, client, path in (("diff page", web, "/traces/diff/?s=run-a&s=run-b"), ("diff API", api, "/api/v1/session-diff?a=run-a&b=run-b")):
        times, cpu, queries = timed(client, path, max(args.repeat // 2, 3))
        slowest = max(slowest, p95(times))
        ratio = statistics.median(times) / statistics.median(read)
        print(f"{label:52} {statistics.median(times):8.1f} {p95(times):8.1f} {statistics.median(cpu):8.1f} {queries:8d} {ratio:15.2f} ×")
    print(f"reading the two sessions' steps alone: p50 {statistics.median(read):.1f} ms")
    load = os.getloadavg()[0]
    print(
        f"worst diff p95 {slowest:.1f} ms (target < 1,000 ms): {'met' if slowest < 1000 else 'NOT met'}; machine: {os.cpu_count()} CPUs, load average {load:.1f}"
    )


if __name__ == "__main__":
    main()
