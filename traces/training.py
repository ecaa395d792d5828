"""Training data out: a task group's tasks as JSONL in OpenAI's chat fine-tuning format.

One line per task, `{"messages": [...]}`, its conversation in order. Only
tasks not excluded from training are exported: a session reported `fail`
excludes its tasks (see `actions.report_outcome` and segmentation).

It streams: tasks are read in keyset chunks (pk > last, LIMIT CHUNK) and the
spans of each chunk in one query through the `span_task_assigned` index, so
memory holds one chunk whatever the number of tasks, and no cursor or
transaction stays open between chunks while a slow client reads.
"""

import json
from collections.abc import Iterator
from datetime import datetime, time

from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from .models import Span, Task

CHUNK = 500
MESSAGE_FIELDS = ("role", "content", "name", "tool_call_id", "tool_calls")


class BadFilter(ValueError):
    pass


def parse_bound(value: str | None, *, end: bool) -> datetime | None:
    """A date (the whole day) or a datetime, as an aware datetime; None when empty."""
    if not value:
        return None
    if moment := parse_datetime(value):
        return moment if timezone.is_aware(moment) else timezone.make_aware(moment)
    if day := parse_date(value):
        return timezone.make_aware(datetime.combine(day, time.max if end else time.min))
    raise BadFilter(f"{value!r} is not a date (YYYY-MM-DD) or a datetime (ISO 8601).")


def training_tasks(project, group=None, since=None, until=None):
    tasks = Task.objects.filter(project=project, excluded_from_training=False)
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


def jsonl_lines(tasks) -> Iterator[str]:
    """One JSON line per task that has an assistant message (tasks without one teach nothing), a chunk's lines at a time."""
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
        lines = []
        for pk in ids:
            messages = conversation(calls.pop(pk))
            if any(m["role"] == "assistant" for m in messages):
                lines.append(json.dumps({"messages": messages}, ensure_ascii=False) + "\n")
        # One write per chunk, not per line: far fewer trips through the response machinery.
        if lines:
            yield "".join(lines)


def filename(group, since, until) -> str:
    parts = [f"group-{group.pk}"] + [f"{label}-{moment:%Y%m%d}" for label, moment in (("from", since), ("to", until)) if moment]
    return "-".join(parts) + ".jsonl"


def training_data_response(project, group, params):
    """The group's training data, streamed as a JSONL download (dashboard and API); BadFilter for a bad date."""
    since, until = parse_bound(params.get("since"), end=False), parse_bound(params.get("until"), end=True)
    response = StreamingHttpResponse(jsonl_lines(training_tasks(project, group, since, until)), content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename(group, since, until)}"'
    return response
