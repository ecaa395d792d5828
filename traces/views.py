from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from .api import task_groups_with_stats
from .filters import by_user_and_metadata
from .models import Span, TaskGroup, TraceSession
from .training import BadFilter, training_data_response

PAGE_SIZE = 50
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7), "30d": timedelta(days=30)}


@login_required
def sessions(request):
    qs = TraceSession.objects.for_user(request.user, request.project).select_related("run")
    chosen_range = request.GET.get("range", "")
    if chosen_range in RANGES:
        qs = qs.filter(last_span_at__gte=timezone.now() - RANGES[chosen_range])
    if request.GET.get("outcome") in {"success", "fail", "none"}:
        qs = qs.filter(outcome="" if request.GET["outcome"] == "none" else request.GET["outcome"])
    if request.GET.get("run", "").isdigit():
        qs = qs.filter(run_id=int(request.GET["run"]))
    qs = by_user_and_metadata(qs, request.GET)
    # Keyset pagination: "older than this time" instead of page numbers, so
    # no COUNT(*) and no OFFSET however many sessions there are.
    if before := parse_datetime(request.GET.get("before", "") or ""):
        qs = qs.filter(last_span_at__lt=before)
    rows = list(qs.order_by("-last_span_at", "-pk")[: PAGE_SIZE + 1])
    older = rows[PAGE_SIZE - 1].last_span_at.isoformat() if len(rows) > PAGE_SIZE else None
    params = request.GET.copy()
    params.pop("before", None)
    return render(
        request,
        "traces/sessions.html",
        {"sessions": rows[:PAGE_SIZE], "older": older, "filters": params.urlencode(), "ranges": RANGES, "chosen_range": chosen_range},
    )


@login_required
def session_detail(request, session_id):
    session = get_object_or_404(TraceSession.objects.for_user(request.user, request.project).select_related("run"), session_id=session_id)
    spans = list(Span.objects.filter(project=session.project, session_id=session.session_id).select_related("task")[:2000])
    start = min((s.start_unix_nano for s in spans), default=0)
    end = max((s.end_unix_nano for s in spans), default=1)
    width = max(end - start, 1)
    depth = _depths(spans)
    for span in spans:
        span.offset_pct = 100 * (span.start_unix_nano - start) / width
        span.width_pct = max(100 * (span.end_unix_nano - span.start_unix_nano) / width, 0.5)
        span.depth = depth.get(span.span_id, 0)
    tasks = session.tasks.select_related("group")
    return render(
        request,
        "traces/session.html",
        {"session": session, "spans": spans, "tasks": tasks, "total_ms": width / 1e6, "quiet_seconds": settings.TRACE_QUIET_SECONDS},
    )


@login_required
def groups(request):
    return render(request, "traces/groups.html", {"groups": list(task_groups_with_stats(request.user, request.project))})


@login_required
def group_training_data(request, pk):
    group = get_object_or_404(TaskGroup.objects.for_user(request.user, request.project), pk=pk)
    try:
        return training_data_response(request.project, group, request.GET)
    except BadFilter as exc:
        return HttpResponseBadRequest(str(exc))


def _depths(spans):
    by_id = {s.span_id: s for s in spans}
    depths = {}
    for span in spans:
        depth, current = 0, span
        while current.parent_span_id in by_id and depth < 50:
            current = by_id[current.parent_span_id]
            depth += 1
        depths[span.span_id] = depth
    return depths
