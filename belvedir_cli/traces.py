"""`bv traces`: sessions, one session, and training data out."""

import sys
from pathlib import Path

import click

from .main import cli, client, id_by_name, json_option, output


@cli.group()
def traces():
    """Trace sessions and training data."""


@traces.command("sessions")
@click.option("--outcome", type=click.Choice(["success", "fail"]))
@click.option("--run", "run_id", type=int, help="Only the sessions of this harness run.")
@click.option("--limit", type=int, default=50, show_default=True)
@json_option
def traces_sessions(outcome, run_id, limit):
    """The latest sessions, newest first."""
    params = {k: v for k, v in {"outcome": outcome, "run": run_id}.items() if v}
    body = client().get("sessions", **params)
    sessions = list(body["results"])
    while body.get("next") and len(sessions) < limit:
        body = client().request("GET", body["next"].split("/api/v1/", 1)[1])
        sessions += body["results"]
    output(sessions[:limit], ["session_id", "last_span_at", "span_count", "input_tokens", "output_tokens", "outcome", "run"])


@traces.command("show")
@click.argument("session_id")
@json_option
def traces_show(session_id):
    """A session: its facts, the tasks found in it and its spans."""
    body = client().get(f"sessions/{session_id}")
    if click.get_current_context().obj["json"]:
        return output(body)
    output({k: body[k] for k in ["session_id", "first_span_at", "last_span_at", "span_count", "input_tokens", "output_tokens", "outcome", "run"]})
    output(body["tasks"], ["id", "name", "group", "span_count", "excluded_from_training"], title="Tasks")
    output(body["spans"], ["name", "span_kind", "model", "latency_ms", "status_code"], title="Spans")


def group_id(name_or_id: str) -> int:
    return id_by_name("task-groups", name_or_id, "No task group named {name} (see the Task groups page, or GET /api/v1/task-groups).")


@traces.command("export")
@click.argument("group")
@click.option("--since", help="From this date (YYYY-MM-DD) or time (ISO 8601).")
@click.option("--until", help="Up to this date (inclusive) or time.")
@click.option("-o", "--output", "path", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of stdout.")
@json_option
def traces_export(group, since, until, path):
    """A task group's tasks as OpenAI chat fine-tuning JSONL, streamed; tasks of failed sessions are left out."""
    params = {k: v for k, v in {"since": since, "until": until}.items() if v}
    pk = group_id(group)
    lines = 0
    with client().stream(f"task-groups/{pk}/training-data", **params) as response:
        sink = open(path, "wb") if path else sys.stdout.buffer
        try:
            for chunk in response.iter_bytes():
                sink.write(chunk)
                lines += chunk.count(b"\n")
        finally:
            if path:
                sink.close()
            else:
                sink.flush()
    if path:
        output({"group": pk, "file": str(path), "lines": lines})
