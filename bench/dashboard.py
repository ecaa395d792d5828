"""Dashboard and API page times with a big project: 10,000 runs, 1,000,000 spans.

Fills a throwaway PostgreSQL database (`belvedir_bench_pages`) in bulk with
SQL, then requests each page 20 times in-process through Django's test
client (no network), printing p50/p95 and the number of SQL queries per page.
Target: p95 under 200 ms, query counts bounded (they do not grow with data).

Usage: .venv/bin/python bench/dashboard.py [--spans 1000000] [--runs 10000]
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


def fill(url, runs, spans, project_id, harness_id, user_id):
    sessions = spans // 50
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO harnesses_run (project_id, harness_id, status, compute_type, price_cents, created_by_id, commit_sha, score,
                   model_label, results_error, status_message, log_tail, extra_env, secret_env, created_at, launched_at, finished_at)
               SELECT %s, %s, 'succeeded', 'cpu', 50, %s, md5(i::text), (i %% 100) / 100.0, 'model-' || (i %% 5), '', '', 'log line', '{}', '{}',
                      now() - (i || ' minutes')::interval, now() - (i || ' minutes')::interval, now() - (i || ' minutes')::interval + interval '40 seconds'
               FROM generate_series(1, %s) AS i""",
            (project_id, harness_id, user_id, runs),
        )
        # Each run's charge, as the ledger holds it: the home page sums spend per day over 30 days.
        conn.execute(
            """INSERT INTO billing_ledgerentry (account_id, kind, amount_cents, balance_after_cents, reference, memo, created_at)
               SELECT a.id, 'run_charge', -50, 0, 'run:' || r.id, '', r.created_at
               FROM harnesses_run r JOIN billing_account a ON a.project_id = r.project_id WHERE r.project_id = %s""",
            (project_id,),
        )
        conn.execute(
            """INSERT INTO traces_tracesession (project_id, session_id, first_span_at, last_span_at, span_count, input_tokens, output_tokens,
                   outcome, needs_processing, last_received_at, user_id, metadata)
               SELECT %s, 'session-' || i, now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval, 50, 6000, 2000,
                      CASE WHEN i %% 3 = 0 THEN 'success' ELSE '' END, false, now(), 'user-' || (i %% 500),
                      -- a common value (1 in 10 sessions), a rare one (1 in 5,000) and a varied key
                      jsonb_build_object('plan', CASE WHEN i %% 5000 = 0 THEN 'rare' WHEN i %% 10 = 0 THEN 'enterprise' ELSE 'free' END,
                                         'region', 'r' || (i %% 7))
               FROM generate_series(1, %s) AS i""",
            (project_id, sessions),
        )
        conn.execute(
            """INSERT INTO traces_span (project_id, trace_id, span_id, parent_span_id, name, kind, start_time, end_time, start_unix_nano,
                   end_unix_nano, status_code, status_message, attributes, events, resource, scope, session_id, user_id, span_kind,
                   workflow_name, model, prompt, completion, input_tokens, output_tokens, latency_ms, received_at)
               SELECT %s, lpad(to_hex(i / 50), 32, '0'), lpad(to_hex(i), 16, '0'), '', 'openai.chat', 3,
                      now() - ((i / 50) || ' seconds')::interval, now() - ((i / 50) || ' seconds')::interval + interval '800 ms',
                      i::bigint * 1000000, i::bigint * 1000000 + 800000000, 0, '',
                      jsonb_build_object('gen_ai.request.model', 'gpt-4o-mini', 'gen_ai.prompt.0.content', repeat('word ', 100)),
                      '[]', '{"service.name": "bench"}', 'openllmetry', 'session-' || (i / 50 + 1), '', 'llm', '', 'gpt-4o-mini',
                      jsonb_build_array(jsonb_build_object('role', 'user', 'content', repeat('word ', 60))),
                      jsonb_build_array(jsonb_build_object('role', 'assistant', 'content', repeat('word ', 40))),
                      120, 40, 800, now()
               FROM generate_series(0, %s - 1) AS i""",
            (project_id, spans),
        )
        conn.execute("ANALYZE")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with throwaway_database("belvedir_bench_pages") as url:
        measure(url, args)


def measure(url, args):
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from belvedir.core.actions import create_account
    from belvedir.core.models import ApiKey
    from billing.models import Account
    from harnesses.models import Harness

    user = create_account(username="bench", password=None)
    project = user.memberships.get().project
    harness = Harness.objects.create(project=project, name="bench", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    Account.for_project(project)
    started = time.perf_counter()
    fill(url, args.runs, args.spans, project.pk, harness.pk, user.pk)
    print(f"filled {args.runs:,} runs, {args.spans:,} spans, {args.spans // 50:,} sessions in {time.perf_counter() - started:.0f} s")

    web = Client(SERVER_NAME="localhost")
    web.force_login(user)
    api = APIClient(SERVER_NAME="localhost")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiKey.issue(project=project, user=user, name='bench')[1]}")
    last_run = harness.runs.order_by("-pk").values_list("pk", flat=True).first()
    pages = [
        ("dashboard / (home)", web, "/"),
        ("dashboard /harnesses/", web, "/harnesses/"),
        ("dashboard harness page", web, f"/harnesses/{harness.pk}/"),
        ("dashboard run page", web, f"/runs/{last_run}/"),
        ("dashboard /traces/", web, "/traces/"),
        ("dashboard /traces/?outcome=success", web, "/traces/?outcome=success"),
        ("dashboard /traces/?user=user-7", web, "/traces/?user=user-7"),
        ("dashboard /traces/?metadata=plan=enterprise", web, "/traces/?metadata=plan%3Denterprise"),
        ("dashboard /traces/?metadata=plan=rare", web, "/traces/?metadata=plan%3Drare"),
        ("dashboard session page", web, "/traces/sessions/session-1/"),
        ("dashboard /traces/groups/", web, "/traces/groups/"),
        ("dashboard /evals/", web, "/evals/"),
        ("dashboard /settings/balance/", web, "/settings/balance/"),
        ("api /api/v1/runs", api, "/api/v1/runs"),
        ("api /api/v1/sessions", api, "/api/v1/sessions"),
        ("api /api/v1/sessions?metadata=plan=rare", api, "/api/v1/sessions?metadata=plan%3Drare"),
        ("api /api/v1/sessions/session-1", api, "/api/v1/sessions/session-1"),
    ]
    print(f"{'page':48} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8}")
    worst = 0.0
    for label, client, path in pages:
        client.get(path)  # warm-up, not counted: template compilation, first plans
        times = []
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as queries:
                t = time.perf_counter()
                response = client.get(path)
                times.append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200, (path, response.status_code)
        times.sort()
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        worst = max(worst, p95)
        print(f"{label:48} {statistics.median(times):8.1f} {p95:8.1f} {len(queries):8d}")
    print(f"worst p95 {worst:.1f} ms (target < 200 ms); machine: {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
