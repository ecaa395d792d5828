"""Training-data export memory and speed: a task group of N tasks streamed as JSONL.

Fills a throwaway PostgreSQL database in bulk with SQL (N tasks, two LLM
spans each, the second resending the first's history), then streams the
group's export through Django's test client, reading the body chunk by
chunk as a client would, and prints lines, seconds and Python's peak traced
memory (tracemalloc) for 10% of the tasks and for all of them.
Flat memory means the two peaks are about the same.

Usage: .venv/bin/python bench/training_export.py [--tasks 100000]
"""

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.throwaway import throwaway_database  # noqa: E402


def fill(url, project_id, group_id, session_id, tasks, offset):
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO traces_task (project_id, session_id, group_id, key, name, first_user_message, started_at, ended_at, span_count, excluded_from_training)
               SELECT %s, %s, %s, 'k' || i, 'support', 'question ' || i, now(), now(), 2, i %% 10 = 0
               FROM generate_series(%s::int, %s::int) AS i""",
            (project_id, session_id, group_id, offset, offset + tasks - 1),
        )
        conn.execute(
            """INSERT INTO traces_span (project_id, trace_id, span_id, parent_span_id, name, kind, start_time, end_time, start_unix_nano,
                   end_unix_nano, status_code, status_message, attributes, events, resource, scope, session_id, user_id, span_kind,
                   workflow_name, model, prompt, completion, input_tokens, output_tokens, latency_ms, received_at, task_id)
               SELECT %s, lpad(to_hex(t.id), 32, '0'), lpad(to_hex(t.id * 2 + s), 16, '0'), '', 'openai.chat', 3, now(), now(), s, s, 0, '',
                      '{}', '[]', '{}', '', 'bench', '', 'llm', '', 'gpt-4o-mini',
                      CASE WHEN s = 0 THEN jsonb_build_array(jsonb_build_object('role', 'system', 'content', 'You are support.'),
                                                             jsonb_build_object('role', 'user', 'content', t.first_user_message || repeat(' word', 60)))
                           ELSE jsonb_build_array(jsonb_build_object('role', 'system', 'content', 'You are support.'),
                                                  jsonb_build_object('role', 'user', 'content', t.first_user_message || repeat(' word', 60)),
                                                  jsonb_build_object('role', 'assistant', 'content', 'Looking' || repeat(' word', 40)),
                                                  jsonb_build_object('role', 'user', 'content', 'and then?')) END,
                      jsonb_build_array(jsonb_build_object('role', 'assistant', 'content', CASE WHEN s = 0 THEN 'Looking' || repeat(' word', 40) ELSE 'Done.' END)),
                      100, 40, 800, now(), t.id
               FROM traces_task t CROSS JOIN generate_series(0, 1) AS s
               WHERE t.group_id = %s""",
            (project_id, group_id),
        )
        conn.execute("ANALYZE")


def export(web, group_id):
    tracemalloc.start()
    started = time.perf_counter()
    response = web.get(f"/traces/groups/{group_id}/training-data.jsonl")
    lines = sum(chunk.count(b"\n") for chunk in response.streaming_content)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return lines, seconds, peak


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=100_000)
    args = parser.parse_args()
    with throwaway_database("belvedir_bench_export") as url:
        measure(url, args)


def measure(url, args):
    from django.test import Client
    from django.utils import timezone

    from belvedir.core.actions import create_account
    from traces.models import TaskGroup, TraceSession

    user = create_account(username="bench", password=None)
    project = user.memberships.get().project
    session = TraceSession.objects.create(project=project, session_id="bench", first_span_at=timezone.now(), last_span_at=timezone.now())
    web = Client(SERVER_NAME="localhost")
    web.force_login(user)
    print(f"{'tasks':>8} {'lines':>8} {'seconds':>8} {'peak MB':>8}")
    offset = 0
    for size in (10, args.tasks // 10, args.tasks):  # the first warms up imports and plans, not counted
        group = TaskGroup.objects.create(project=project, key=f"g{size}", name=f"g{size}")
        fill(url, project.pk, group.pk, session.pk, size, offset)
        offset += size
        lines, seconds, peak = export(web, group.pk)
        print(f"{size:8,} {lines:8,} {seconds:8.1f} {peak / 1e6:8.1f}")


if __name__ == "__main__":
    main()
