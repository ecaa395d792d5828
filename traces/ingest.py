from collections import defaultdict

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest, Least
from django.utils import timezone

from .extract import extract, to_datetime
from .models import Span, TraceSession


def store_spans(project, raw_spans: list[dict]) -> int:
    """Store one request's spans with one multi-row insert; update their sessions.

    A span already stored (a client retrying a batch) is skipped by the
    unique (project, trace_id, span_id) constraint rather than duplicated.
    """
    now = timezone.now()
    rows = []
    for raw in raw_spans:
        fields = extract(raw)
        rows.append(
            Span(
                project=project,
                trace_id=raw["trace_id"],
                span_id=raw["span_id"],
                parent_span_id=raw["parent_span_id"],
                name=raw["name"],
                kind=raw["kind"],
                start_time=to_datetime(raw["start"]),
                end_time=to_datetime(raw["end"]),
                start_unix_nano=raw["start"],
                end_unix_nano=raw["end"],
                status_code=raw["status_code"],
                status_message=raw["status_message"],
                attributes=raw["attributes"],
                events=raw["events"],
                resource=raw["resource"],
                scope=raw["scope"],
                received_at=now,
                **fields,
            )
        )
    with transaction.atomic():
        Span.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
        _touch_sessions(project, rows, now)
    return len(rows)


def _touch_sessions(project, rows, now):
    by_session = defaultdict(list)
    for row in rows:
        if row.session_id:
            by_session[row.session_id].append(row)
    if not by_session:
        return
    # Create missing sessions in one statement, then move each one's counters.
    # Counts are approximate until segmentation recomputes them from the spans.
    TraceSession.objects.bulk_create(
        [
            TraceSession(
                project=project,
                session_id=session_id,
                first_span_at=min(r.start_time for r in spans),
                last_span_at=max(r.end_time for r in spans),
                span_count=0,
                run_id=_run_id(project, session_id),
            )
            for session_id, spans in by_session.items()
        ],
        ignore_conflicts=True,
    )
    for session_id, spans in by_session.items():
        TraceSession.objects.filter(project=project, session_id=session_id).update(
            span_count=F("span_count") + len(spans),
            input_tokens=F("input_tokens") + sum(r.input_tokens or 0 for r in spans),
            output_tokens=F("output_tokens") + sum(r.output_tokens or 0 for r in spans),
            first_span_at=Least("first_span_at", min(r.start_time for r in spans)),
            last_span_at=Greatest("last_span_at", max(r.end_time for r in spans)),
            needs_processing=True,
            last_received_at=now,
        )


def _run_id(project, session_id):
    """A run's id is its session id: link the session when that run is in the project."""
    if not session_id.isdigit() or len(session_id) > 18:
        return None
    from harnesses.models import Run

    return Run.objects.filter(project=project, pk=int(session_id)).values_list("pk", flat=True).first()
