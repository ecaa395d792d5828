"""Training-data export memory and speed: a task group of N tasks streamed as JSONL, checked against the benchmark catalog.

Fills a throwaway PostgreSQL database in bulk with SQL (N tasks, two LLM
spans each, the second resending the first's history), then streams the
group's export through Django's test client, reading the body chunk by
chunk as a client would, and prints lines, seconds and Python's peak traced
memory (tracemalloc) for 10% of the tasks and for all of them, each twice:
the export as it is (every task checked against the catalog's overlap
index, evals/contamination.py), and a baseline in the same run with the
check stubbed out (the export before the check, but for its canary line).
Flat memory means the peaks at 10% and 100% are about the same; the check's
target is at most 2x the baseline's peak at N tasks.

First it builds the overlap index again (as `manage.py install_benchmark_data`
does once per catalog version) and prints its size and build time; the
exports open it memory-mapped, outside Python's heap.

Usage: .venv/bin/python bench/training_export.py [--tasks 100000]
"""

import argparse
import os
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


def export(web, group_id, *, traced):
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    response = web.get(f"/traces/groups/{group_id}/training-data.jsonl")
    lines = sum(chunk.count(b"\n") for chunk in response.streaming_content)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    tracemalloc.stop()
    return lines, seconds, peak


class NoCheck:
    """The baseline: an index that finds nothing and costs nothing."""

    key = "none"

    def find_many(self, conversations):
        return [None] * len(conversations)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=100_000)
    args = parser.parse_args()
    # The test client speaks plain HTTP; with DEBUG off every request would be redirected to https.
    os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
    with throwaway_database("belvedir_bench_export") as url:
        measure(url, args)


def build_index():
    from evals import contamination

    started = time.perf_counter()
    staging = contamination.build()
    seconds = time.perf_counter() - started
    index = contamination.current()
    size = sum(f.stat().st_size for f in staging.iterdir())
    print(
        f"overlap index {index.key}: {index.meta['ngrams']:,} 13-grams, {index.meta['exact_texts']:,} exact texts, "
        f"{len(index.row_ids):,} rows of {len(index.meta['benchmarks'])} benchmarks; {size / 1e6:.1f} MB on disk, built in {seconds:.1f} s"
    )
    return index


def measure(url, args):
    from django.test import Client
    from django.utils import timezone

    from belvedir.core.actions import create_account
    from evals import contamination
    from traces.models import TaskGroup, TraceSession

    index = build_index()
    user = create_account(username="bench", password=None)
    project = user.memberships.get().project
    session = TraceSession.objects.create(project=project, session_id="bench", first_span_at=timezone.now(), last_span_at=timezone.now())
    web = Client(SERVER_NAME="localhost")
    web.force_login(user)
    # Traced seconds are tracemalloc's (it slows every allocation, the check's numpy arrays too); untraced ones run after, the data warm for both.
    print(f"{'tasks':>8} {'export':>9} {'lines':>8} {'traced s':>9} {'peak MB':>8} {'seconds':>8}")
    offset = 0
    for size in (10, args.tasks // 10, args.tasks):  # the first warms up imports and plans, not counted
        group = TaskGroup.objects.create(project=project, key=f"g{size}", name=f"g{size}")
        fill(url, project.pk, group.pk, session.pk, size, offset)
        offset += size
        runs = {}
        for traced in (True, False):
            for label, opened in (("baseline", NoCheck()), ("checked", index)):
                contamination.current = lambda opened=opened: opened
                runs.setdefault(label, []).append(export(web, group.pk, traced=traced))
        for label, ((lines, traced_seconds, peak), (_, seconds, _)) in runs.items():
            print(f"{size:8,} {label:>9} {lines:8,} {traced_seconds:9.1f} {peak / 1e6:8.1f} {seconds:8.1f}")


if __name__ == "__main__":
    main()
