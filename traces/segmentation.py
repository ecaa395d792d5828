"""Quiet sessions into tasks, tasks into project-wide groups.

A workflow span (the SDK's `task()`) and everything under it is one task.
LLM spans outside any workflow are split into tasks at idle gaps. Every task
joins a group: the same workflow name, or else the same normalised opening of
its first user message. Tasks are keyed by their first span, so a session
re-opened by late spans is segmented again without duplicate tasks.
"""

import hashlib
import re
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Min, Sum
from django.utils import timezone

from . import evaluators
from .models import Span, Task, TaskGroup, TraceSession

BATCH = 50
# Enough words to tell intents apart, few enough that "weather in Paris" and
# "weather in Rome" land together.
SIGNATURE_WORDS = 5


def process_quiet_sessions(now=None) -> int:
    """Segment sessions that have been quiet for TRACE_QUIET_SECONDS; bounded per call.

    Returns how many it segmented (at most BATCH), not counting sessions
    another segmenter was holding.
    """
    now = now or timezone.now()
    quiet_since = now - timedelta(seconds=settings.TRACE_QUIET_SECONDS)
    sessions = list(TraceSession.objects.filter(needs_processing=True, last_received_at__lte=quiet_since).order_by("last_received_at")[:BATCH])
    segmented = [session.pk for session in sessions if segment(session, now)]
    # Scored now that their tasks are known: on the eval queue, never in the path of ingest or of this loop.
    evaluators.enqueue_for(segmented)
    return len(segmented)


def drain_quiet_sessions(stop=None) -> int:
    """Every session due now, batch after batch, unless `stop` (an Event) is set."""
    total = 0
    while not (stop and stop.is_set()):
        done = process_quiet_sessions()
        total += done
        if done < BATCH:
            break
    return total


def segment(session: TraceSession, now=None) -> bool:
    """Segment one session; False when another segmenter holds it right now."""
    spans = list(Span.objects.filter(project=session.project_id, session_id=session.session_id).order_by("start_unix_nano", "span_id"))
    chunks = _workflow_tasks(spans) + _gap_tasks(spans)
    with transaction.atomic():
        # Locked so ingest's `needs_processing=True` for a span that lands
        # meanwhile is not lost under our own update below. Skipped when
        # locked: the scheduled task and `segment_sessions` may overlap, and
        # the holder is doing this same work (or ingest is re-opening it).
        if TraceSession.objects.select_for_update(skip_locked=True).filter(pk=session.pk).first() is None:
            return False
        kept = []
        for key, name, members, workflow in chunks:
            first_message = _first_user_message(members)
            group = _group_for(session.project_id, workflow, first_message)
            task, _ = Task.objects.update_or_create(
                session=session,
                key=key,
                defaults={
                    "project_id": session.project_id,
                    "group": group,
                    "name": name[:255],
                    "first_user_message": first_message[:5000],
                    "started_at": min(s.start_time for s in members),
                    "ended_at": max(s.end_time for s in members),
                    "span_count": len(members),
                    "excluded_from_training": session.outcome == TraceSession.Outcome.FAIL,
                },
            )
            Span.objects.filter(pk__in=[s.pk for s in members]).update(task=task)
            kept.append(task.pk)
        Task.objects.filter(session=session).exclude(pk__in=kept).delete()
        totals = Span.objects.filter(project=session.project_id, session_id=session.session_id).aggregate(
            n=Count("pk"), inp=Sum("input_tokens"), out=Sum("output_tokens"), first=Min("start_time"), last=Max("end_time")
        )
        still_quiet = {"last_received_at__lte": session.last_received_at}
        TraceSession.objects.filter(pk=session.pk).update(
            span_count=totals["n"] or 0,
            input_tokens=totals["inp"] or 0,
            output_tokens=totals["out"] or 0,
            first_span_at=totals["first"] or session.first_span_at,
            last_span_at=totals["last"] or session.last_span_at,
            processed_at=now or timezone.now(),
        )
        TraceSession.objects.filter(pk=session.pk, **still_quiet).update(needs_processing=False)
    return True


def _workflow_tasks(spans):
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if s.span_kind == "workflow" and not _has_workflow_ancestor(s, by_id)]
    root_ids = {r.span_id for r in roots}
    members = {r.span_id: [r] for r in roots}
    for span in spans:
        if span.span_id in root_ids:
            continue
        if (root := _workflow_root(span, by_id, root_ids)) is not None:
            members[root].append(span)
    return [(f"wf:{r.trace_id}:{r.span_id}", r.workflow_name or r.name, members[r.span_id], r.workflow_name or r.name) for r in roots]


def _gap_tasks(spans):
    by_id = {s.span_id: s for s in spans}
    roots = {s.span_id for s in spans if s.span_kind == "workflow"}
    loose = [s for s in spans if s.is_llm and s.span_id not in roots and _workflow_root(s, by_id, roots) is None]
    gap = settings.TRACE_TASK_IDLE_GAP_SECONDS * 1_000_000_000
    chunks, current, last_end = [], [], None
    for span in loose:
        if current and span.start_unix_nano - last_end > gap:
            chunks.append(current)
            current = []
        current.append(span)
        last_end = max(last_end or 0, span.end_unix_nano)
    if current:
        chunks.append(current)
    return [(f"gap:{c[0].trace_id}:{c[0].span_id}", c[0].name, c, "") for c in chunks]


def _workflow_root(span, by_id, root_ids, limit=1000):
    """The workflow span this span sits under, if any (bounded walk up the parents)."""
    current = span
    for _ in range(limit):
        parent = by_id.get(current.parent_span_id)
        if parent is None:
            return None
        if parent.span_id in root_ids:
            return parent.span_id
        current = parent
    return None


def _has_workflow_ancestor(span, by_id, limit=1000):
    current = span
    for _ in range(limit):
        parent = by_id.get(current.parent_span_id)
        if parent is None:
            return False
        if parent.span_kind == "workflow":
            return True
        current = parent
    return False


def _first_user_message(members) -> str:
    for span in sorted(members, key=lambda s: s.start_unix_nano):
        for message in span.prompt:
            if message.get("role") == "user" and message.get("content"):
                return str(message["content"])
    return ""


def signature(message: str) -> str:
    """A deterministic similarity key: the first words, lower-cased, numbers and punctuation dropped."""
    words = re.sub(r"[^a-z\s]", " ", message.lower()).split()
    return " ".join(words[:SIGNATURE_WORDS])


def _group_for(project_id, workflow: str, first_message: str) -> TaskGroup | None:
    if workflow:
        key, name = f"workflow:{hashlib.sha1(workflow.encode()).hexdigest()[:16]}", workflow
    elif first_message:
        sig = signature(first_message) or first_message[:40]
        key, name = f"msg:{hashlib.sha1(sig.encode()).hexdigest()[:16]}", sig
    else:
        return None
    group, _ = TaskGroup.objects.get_or_create(project_id=project_id, key=key, defaults={"name": name[:255]})
    return group
