"""Training data out: a task group's tasks as JSONL in OpenAI's chat fine-tuning format.

One line per task, `{"messages": [...]}`, its conversation in order. Only
tasks not excluded from training are exported: a session reported `fail`
excludes its tasks (see `actions.report_outcome` and segmentation), and a
job's trial's session is never exported (it works a benchmark's task).

Before a task's line is written, its user and assistant texts are checked
against every catalog benchmark's inputs and references
(evals/contamination.py: normalised exact match, 13-gram overlap). A task
that overlaps is left out and counted, or, with allow_benchmark_overlap,
written with a "benchmark_overlap" key naming what it matched;
`show=overlaps` lists those tasks instead of the training lines.

The last line is the canary line: a valid example, so fine-tuning tools take
the file as it is, whose answer is the group's canary GUID (the same in every
export of the group), with a "metadata" key that counts the lines and what
the check found. It comes last because the counts are known only once every
task has been read, and a stream cannot go back to its first line.

It streams: tasks are read in keyset chunks (pk > last, LIMIT CHUNK) and the
spans of each chunk in one query through the `span_task_assigned` index, so
memory holds one chunk whatever the number of tasks, and no cursor or
transaction stays open between chunks while a slow client reads.
"""

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, time
from urllib.parse import urlencode

from django.http import StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from evals import contamination

from .models import Span, Task

CHUNK = 500
MESSAGE_FIELDS = ("role", "content", "name", "tool_call_id", "tool_calls")
# The texts the benchmark check reads: the prompt and the answer, not system prompts or tool results.
CHECKED_ROLES = ("user", "assistant")
CANARY_QUESTION = "What is the canary GUID of this Belvedir training set?"
# Conversations checked at a time: the index's searches cost ~40 µs a call whatever their size, and a
# batch this big keeps their arrays small (~50 KB for ordinary conversations).
CHECK_BATCH = 50
# The overlap page lists this many; the JSONL listing has them all.
PAGE_OVERLAPS = 200
FLAGS = {"1": True, "true": True, "on": True, "yes": True, "": False, "0": False, "false": False, "off": False, "no": False}


class BadFilter(ValueError):
    status_code = 400


def parse_bound(value: str | None, *, end: bool) -> datetime | None:
    """A date (the whole day) or a datetime, as an aware datetime; None when empty."""
    if not value:
        return None
    try:
        # A bare date first: parse_datetime reads "2026-12-01" too (as midnight), which would cut the day off an end.
        if day := parse_date(value):
            return timezone.make_aware(datetime.combine(day, time.max if end else time.min))
        if moment := parse_datetime(value):
            return moment if timezone.is_aware(moment) else timezone.make_aware(moment)
    except ValueError:  # well formed, but no such day or time (2026-13-45): Django's parsers raise
        pass
    raise BadFilter(f"{value!r} is not a date (YYYY-MM-DD) or a datetime (ISO 8601).")


def training_tasks(project, group=None, since=None, until=None):
    # A job's trial works a benchmark's task: its instruction is the benchmark's, and the catalog check below knows
    # only the catalog's benchmarks, not imported task sets. Its session is never training data.
    tasks = Task.objects.filter(project=project, excluded_from_training=False, session__trial__isnull=True)
    if group is not None:
        tasks = tasks.filter(group=group)
    if since is not None:
        tasks = tasks.filter(started_at__gte=since)
    if until is not None:
        tasks = tasks.filter(started_at__lte=until)
    return tasks


def _message(raw: dict) -> dict | None:
    if not isinstance(raw, dict) or not raw.get("role"):
        return None
    message = {k: raw[k] for k in MESSAGE_FIELDS if raw.get(k) not in (None, "")}
    if isinstance(message.get("tool_calls"), str):
        try:
            message["tool_calls"] = json.loads(message["tool_calls"])
        except ValueError:
            del message["tool_calls"]
    message.setdefault("content", "")
    return message


def _key(message: dict) -> str:
    return json.dumps(message, sort_keys=True)


def conversation(calls) -> list[dict]:
    """The messages of a task's LLM calls, in order, each said once.

    An agent resends the whole history with every call, so a call's prompt
    usually extends what came before: only its new messages are added.
    Otherwise (a fresh context) its messages are added unless already said.
    Then the call's completion.
    """
    messages: list[dict] = []
    for prompt, completion in calls:
        prompt = [m for m in map(_message, prompt or []) if m]
        if prompt[: len(messages)] == messages:
            messages.extend(prompt[len(messages) :])
        else:
            seen = {_key(m) for m in messages}
            for message in prompt:
                if (key := _key(message)) not in seen:
                    messages.append(message)
                    seen.add(key)
        messages.extend(m for m in map(_message, completion or []) if m)
    return messages


@dataclass(frozen=True)
class Checked:
    task: int
    messages: list[dict]
    overlap: contamination.Overlap | None


def _checked(message: dict) -> bool:
    return message["role"] in CHECKED_ROLES and isinstance(message["content"], str)


def checked(tasks, index: contamination.Index) -> Iterator[Checked]:
    """Each task with an assistant message (tasks without one teach nothing), its conversation and the benchmark overlap found in it."""
    last = 0
    while True:
        ids = list(tasks.filter(pk__gt=last).order_by("pk").values_list("pk", flat=True)[:CHUNK])
        if not ids:
            return
        last = ids[-1]
        calls: dict[int, list] = {pk: [] for pk in ids}
        spans = Span.objects.filter(task_id__in=ids).order_by("task_id", "start_unix_nano", "span_id").values_list("task_id", "prompt", "completion")
        for task_id, prompt, completion in spans:
            if prompt or completion:
                calls[task_id].append((prompt, completion))
        batch: list[tuple[int, list[dict]]] = []
        for pk in ids:
            messages = conversation(calls.pop(pk))
            if any(m["role"] == "assistant" for m in messages):
                batch.append((pk, messages))
            if len(batch) == CHECK_BATCH or (pk == last and batch):
                found = index.find_many([[(m["role"], m["content"]) for m in messages if _checked(m)] for _, messages in batch])
                yield from (Checked(task, said, overlap) for (task, said), overlap in zip(batch, found, strict=True))
                batch = []


@dataclass
class Tally:
    lines: int = 0
    left_out: Counter = field(default_factory=Counter)
    marked: Counter = field(default_factory=Counter)


def jsonl_lines(group, tasks, index: contamination.Index, *, allow_overlap: bool = False, overlaps_url: str = "") -> Iterator[str]:
    """The group's training lines, CHUNK at a time, then its canary line; overlapping tasks left out, or marked when allowed."""
    tally = Tally()
    lines: list[str] = []
    for task in checked(tasks, index):
        line = {"messages": task.messages}
        if task.overlap is not None:
            if not allow_overlap:
                tally.left_out[task.overlap.benchmark] += 1
                continue
            tally.marked[task.overlap.benchmark] += 1
            line["benchmark_overlap"] = task.overlap.as_dict()
        lines.append(json.dumps(line, ensure_ascii=False) + "\n")
        # One write per chunk, not per line: far fewer trips through the response machinery.
        if len(lines) == CHUNK:
            tally.lines += len(lines)
            yield "".join(lines)
            lines = []
    tally.lines += len(lines)
    yield "".join(lines) + canary_line(group, index, tally, overlaps_url)


def canary_line(group, index: contamination.Index, tally: Tally, overlaps_url: str) -> str:
    metadata = {
        "belvedir_canary": str(group.canary),
        "task_group": group.pk,
        "exported_at": timezone.now().isoformat(),
        "lines": tally.lines,
        "benchmark_check": {
            "index": index.key,
            "left_out": sum(tally.left_out.values()),
            "left_out_by_benchmark": dict(sorted(tally.left_out.items())),
            "included_marked": sum(tally.marked.values()),
            "included_marked_by_benchmark": dict(sorted(tally.marked.items())),
            "overlaps": overlaps_url,
        },
    }
    messages = [{"role": "user", "content": CANARY_QUESTION}, {"role": "assistant", "content": canary_answer(group)}]
    return json.dumps({"messages": messages, "metadata": metadata}, ensure_ascii=False) + "\n"


def canary_answer(group) -> str:
    return f"BELVEDIR TRAINING DATA canary GUID {group.canary}"


def _listed(found: list[Checked]) -> list[dict]:
    """Overlapping tasks as listing rows, with their sessions (one query for the lot)."""
    sessions = dict(Task.objects.filter(pk__in=[c.task for c in found]).values_list("pk", "session__session_id"))
    return [{"task": c.task, "session_id": sessions[c.task], **c.overlap.as_dict()} for c in found]


def overlap_lines(tasks, index: contamination.Index) -> Iterator[str]:
    """One JSON line per task the check finds overlapping a benchmark: the task, its session, the benchmark row, the rule and the words."""
    found: list[Checked] = []
    for task in checked(tasks, index):
        if task.overlap is not None:
            found.append(task)
        if len(found) == CHUNK:
            yield "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in _listed(found))
            found = []
    if found:
        yield "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in _listed(found))


def overlap_report(project, group, params) -> dict:
    """The overlap page's figures: tasks checked, overlaps by benchmark, and the first PAGE_OVERLAPS of them."""
    since, until = parse_bound(params.get("since"), end=False), parse_bound(params.get("until"), end=True)
    index = contamination.current()
    checked_count, counts, first = 0, Counter(), []
    for task in checked(training_tasks(project, group, since, until), index):
        checked_count += 1
        if task.overlap is not None:
            counts[task.overlap.benchmark] += 1
            if len(first) < PAGE_OVERLAPS:
                first.append(task)
    return {"checked": checked_count, "total": sum(counts.values()), "counts": sorted(counts.items()), "overlaps": _listed(first), "index": index.meta}


def filename(group, since, until) -> str:
    parts = [f"group-{group.pk}"] + [f"{label}-{moment:%Y%m%d}" for label, moment in (("from", since), ("to", until)) if moment]
    return "-".join(parts) + ".jsonl"


def parse_flag(name: str, value: str | None) -> bool:
    try:
        return FLAGS[(value or "").strip().lower()]
    except KeyError:
        raise BadFilter(f"{name} takes 1 or 0, not {value!r}.") from None


def training_data_response(project, group, params):
    """The group's training data, streamed as a JSONL download (dashboard and API), or with show=overlaps the tasks the check left out.

    BadFilter for a bad parameter; contamination.IndexUnavailable when the catalog's data is missing, before anything is streamed.
    """
    since, until = parse_bound(params.get("since"), end=False), parse_bound(params.get("until"), end=True)
    allow_overlap = parse_flag("allow_benchmark_overlap", params.get("allow_benchmark_overlap"))
    show = params.get("show") or ""
    if show not in ("", "overlaps"):
        raise BadFilter(f"show takes 'overlaps' (the tasks the benchmark check leaves out), not {show!r}.")
    index = contamination.current()
    tasks = training_tasks(project, group, since, until)
    name = filename(group, since, until)
    if show:
        body, name = overlap_lines(tasks, index), name.replace(".jsonl", "-overlaps.jsonl")
    else:
        dates = {k: params[k] for k in ("since", "until") if params.get(k)}
        overlaps_url = f"{reverse('api-training-data', args=[group.pk])}?{urlencode({'show': 'overlaps', **dates})}"
        body = jsonl_lines(group, tasks, index, allow_overlap=allow_overlap, overlaps_url=overlaps_url)
    response = StreamingHttpResponse(body, content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
