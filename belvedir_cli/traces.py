"""`bv traces`: sessions, one session, and training data out."""

import json
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import click

from .terminal import client, id_by_name, json_option, output


@click.group()
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


@traces.command("scores")
@click.option("--evaluator", help="An evaluator's name or id (every evaluator's, without it).")
@click.option("--session", "session_id", help="Only this session's scores.")
@click.option("--status", type=click.Choice(["scored", "error", "skipped"]))
@click.option("--limit", type=int, default=50, show_default=True)
@json_option
def traces_scores(evaluator, session_id, status, limit):
    """Evaluators' scores of live traffic, newest traffic first; without --evaluator, each evaluator's summary."""
    if evaluator is None and session_id:
        output(client().get(f"sessions/{quote(session_id, safe='')}")["scores"], ["evaluator", "version", "task", "status", "value", "error", "scored_at"])
        return
    if evaluator is None:
        rows = []
        for item in client().get("evaluators"):
            detail = client().get(f"evaluators/{item['id']}")
            s = detail["summary"]
            ci = f"{s['mean_ci'][0]:.3f}–{s['mean_ci'][1]:.3f}" if s["mean_ci"] else ""
            rows.append(
                {
                    **item,
                    "scored": s["scored"],
                    "mean": "" if s["mean"] is None else f"{s['mean']:.3f}",
                    "95% CI": ci,
                    "errors": s["errors"],
                    "skipped": s["skipped"],
                }
            )
        output(rows, ["id", "name", "kind", "version", "scored", "mean", "95% CI", "errors", "skipped"])
        return
    evaluator_id = id_by_name("evaluators", evaluator, "No evaluator named {name}: `bv traces scores` lists them.")
    params = {k: v for k, v in {"session": session_id, "status": status, "limit": limit}.items() if v}
    output(client().get(f"evaluators/{evaluator_id}/scores", **params)["results"], ["session_id", "task", "version", "status", "value", "error", "session_at"])


@traces.command("show")
@click.argument("session_id")
@click.option("--kind", type=click.Choice(["llm", "tool", "span"]), help="Only steps of this kind.")
@click.option("--errors", is_flag=True, help="Only steps that ended in error.")
@click.option("--search", "q", help="Only steps with this text in their name, messages or attributes.")
@click.option("--limit", type=int, default=500, show_default=True, help="At most this many steps.")
@json_option
def traces_show(session_id, kind, errors, q, limit):
    """A session's trajectory: its steps in order, LLM calls with their messages, tool calls with arguments and results."""
    params = {k: v for k, v in {"kind": kind, "errors": "1" if errors else None, "q": q, "page_size": min(limit, 500)}.items() if v}
    body = client().get(f"sessions/{quote(session_id, safe='')}/steps", **params)
    steps = list(body["steps"])
    while body.get("next") and len(steps) < limit:
        body = client().request("GET", body["next"].split("/api/v1/", 1)[1])
        steps += body["steps"]
    steps = steps[:limit]
    if click.get_current_context().obj["json"]:
        return output({"session_id": body["session_id"], "outcome": body["outcome"], "summary": body["summary"], "steps": steps})
    summary = body["summary"]
    click.echo(
        f"Session {body['session_id']}: {summary['steps']} steps, {summary['llm_calls']} LLM calls, {summary['tool_calls']} tool calls, "
        f"{summary['input_tokens']} input / {summary['output_tokens']} output tokens, {summary['errors']} errors, outcome {body['outcome'] or 'not reported'}"
    )
    # Plain lines, not a table: a step's messages are what it is read for, and a table cuts them to its column.
    for step in steps:
        row = step_row(step)
        click.echo(f"#{row['#']:<4} {row['kind']:<5} {row['step']}" + (f"  {row['tokens']} tokens" if row["tokens"] else "") + f"  {row['ms']} ms")
        click.echo(f"      {row['what happened']}")


def step_row(step: dict) -> dict:
    """One line of `bv traces show`: what went in and what came out, cut short."""
    if step["kind"] == "tool":
        what = f"{clip(step['arguments'])} → {clip(step['result'])}"
    else:
        said = step.get("prompt", [])[-1:] + step["completion"]  # the diff leaves an LLM call's prompt out
        what = " → ".join(f"{m['role']}: {clip(m['content'] or calls(m))}" for m in said)
    if step["raw_messages"]:
        what = f"(messages as sent: {clip(' '.join(step['raw_messages'].values()))}) {what}"
    if step["error"]:
        what = f"ERROR {step['status_message']} {what}"
    tokens = "" if step["input_tokens"] is None and step["output_tokens"] is None else f"{step['input_tokens'] or 0}/{step['output_tokens'] or 0}"
    name = step["tool"] if step["kind"] == "tool" else step["name"] + (f" ({step['model']})" if step["model"] else "")
    return {"#": step["number"], "kind": step["kind"], "step": name, "tokens": tokens, "ms": f"{step['latency_ms']:.0f}", "what happened": what}


def calls(message: dict) -> str:
    return ", ".join(f"{c['name']}({c['arguments']})" for c in message.get("tool_calls", []))


def clip(text: str, width: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


@traces.command("diff")
@click.argument("session_a")
@click.argument("session_b")
@json_option
def traces_diff(session_a, session_b):
    """Two sessions' steps side by side, aligned by kind and tool; the first divergence marked."""
    body = client().get("session-diff", a=session_a, b=session_b)
    if click.get_current_context().obj["json"]:
        return output(body)
    columns = ["side", "session_id", "steps", "llm_calls", "tool_calls", "input_tokens", "output_tokens", "errors", "duration_ms", "cost", "outcome"]
    output([{"side": "A", **body["a"]}, {"side": "B", **body["b"]}], columns, title="Totals")
    first = body["first_divergence"]
    click.echo("The two trajectories take the same steps." if first is None else f"They diverge at row {first + 1}.")
    rows = []
    for n, row in enumerate(body["rows"]):
        changed = {"same": "", "only_a": "only in A", "only_b": "only in B"}.get(row["status"], ", ".join(row["changes"]))
        mark = "→ " if n == first else ""
        rows.append({"row": f"{mark}{n + 1}", "A": side(row["a"]), "B": side(row["b"]), "changed": changed})
    for row in rows:
        click.echo(f"{row['row']:>6}  A {row['A']}\n        B {row['B']}" + (f"\n        changed: {row['changed']}" if row["changed"] else ""))


def side(step: dict | None) -> str:
    if step is None:
        return "—"
    return f"#{step['number']} {step_row(step)['step']}: {clip(step_row(step)['what happened'], 60)}"


def group_id(name_or_id: str) -> int:
    return id_by_name("task-groups", name_or_id, "No task group named {name} (see the Task groups page, or GET /api/v1/task-groups).")


@traces.command("export")
@click.argument("group")
@click.option("--since", help="From this date (YYYY-MM-DD) or time (ISO 8601).")
@click.option("--until", help="Up to this date (inclusive) or time.")
@click.option("-o", "--output", "path", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of stdout.")
@click.option("--allow-benchmark-overlap", is_flag=True, help="Include tasks that overlap a catalog benchmark, each marked with a benchmark_overlap key.")
@click.option("--show-overlaps", is_flag=True, help="List the tasks the benchmark check leaves out, instead of exporting.")
@json_option
def traces_export(group, since, until, path, allow_benchmark_overlap, show_overlaps):
    """A task group's tasks as OpenAI chat fine-tuning JSONL, streamed; tasks of failed sessions, and tasks that overlap a catalog benchmark, are left out.

    The last line carries the group's canary GUID and what the benchmark check found, which is printed after the export (on stderr when the JSONL goes to stdout).
    """
    params = {k: v for k, v in {"since": since, "until": until}.items() if v}
    pk = group_id(group)
    if show_overlaps:
        return show_export_overlaps(pk, params)
    if allow_benchmark_overlap:
        params["allow_benchmark_overlap"] = "1"
    lines = 0
    # The canary line is the last one, well under this: kept to read the check's counts once the stream ends.
    tail = b""
    with client().stream(f"task-groups/{pk}/training-data", **params) as response:
        sink = open(path, "wb") if path else sys.stdout.buffer
        try:
            for chunk in response.iter_bytes():
                sink.write(chunk)
                lines += chunk.count(b"\n")
                tail = (tail + chunk)[-65536:]
        finally:
            if path:
                sink.close()
            else:
                sink.flush()
    try:
        check = json.loads(tail.rstrip(b"\n").rpartition(b"\n")[2])["metadata"]["benchmark_check"]
    except (ValueError, KeyError, TypeError):
        # The canary line is written last, once every task is read: without it the stream was cut.
        raise click.ClickException("The export ended before its last line (the canary line, with the benchmark check's counts): it is incomplete.") from None
    summary = {
        "group": pk,
        "lines": lines,
        "left_out": check["left_out"],
        "left_out_by_benchmark": check["left_out_by_benchmark"],
        "included_marked": check["included_marked"],
        "included_marked_by_benchmark": check["included_marked_by_benchmark"],
    }
    if path:
        output({"group": pk, "file": str(path), **summary})
    else:
        click.echo(check_summary(group, check), err=True)


def check_summary(group: str, check: dict) -> str:
    def by_benchmark(counts):
        return ", ".join(f"{name} {count}" for name, count in counts.items())

    if check["included_marked"]:
        return f"Included {check['included_marked']} tasks that overlap a benchmark, each marked with benchmark_overlap ({by_benchmark(check['included_marked_by_benchmark'])})."
    if check["left_out"]:
        return (
            f"Left out {check['left_out']} tasks that overlap a benchmark ({by_benchmark(check['left_out_by_benchmark'])}); "
            f"list them with `bv traces export {group} --show-overlaps`, include them marked with --allow-benchmark-overlap."
        )
    return "No task overlaps a benchmark."


def show_export_overlaps(pk: int, params: dict):
    rows = []
    with client().stream(f"task-groups/{pk}/training-data", show="overlaps", **params) as response:
        for line in response.iter_lines():
            if line.strip():
                rows.append(json.loads(line))
    if click.get_current_context().obj["json"]:
        return output(rows)
    if not rows:
        return click.echo("No task overlaps a benchmark.")
    # Plain lines, not a table: the matched words are what a row is read for.
    for row in rows:
        click.echo(f"task {row['task']} (session {row['session_id']}): {row['benchmark']} row {row['row']}, {row['match']} in the {row['role']} message")
        click.echo(f"      {clip(row['text'], 100)}")
    click.echo(f"{len(rows)} tasks overlap a benchmark: {', '.join(f'{n} {c}' for n, c in sorted(Counter(r['benchmark'] for r in rows).items()))}.")
