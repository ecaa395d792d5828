from datetime import timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from belvedir.core.error_views import bad_request
from belvedir.core.ids import parse_id
from belvedir.core.listing import listing
from belvedir.core.scoping import get_scoped_or_404
from evals.contamination import IndexUnavailable

from . import diff, trajectory
from .api import task_groups_with_stats
from .evaluator_rules import session_scores
from .evaluators import filter_by_score
from .filters import TaskGroupFilter, by_user_and_metadata
from .models import Evaluator, TaskGroup, TraceSession
from .training import BadFilter, overlap_report, training_data_response

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
    if run := parse_id(request.GET.get("run")):
        qs = qs.filter(run_id=run)
    qs = filter_by_score(by_user_and_metadata(qs, request.GET), request.GET)
    # Keyset pagination: "older than this time" instead of page numbers, so
    # no COUNT(*) and no OFFSET however many sessions there are.
    try:
        before = parse_datetime(request.GET.get("before", ""))
    except ValueError:  # well formed, but no such time (month 13): the first page, as for any other bad cursor
        before = None
    if before:
        qs = qs.filter(last_span_at__lt=before)
    rows = list(qs.order_by("-last_span_at", "-pk")[: PAGE_SIZE + 1])
    older = rows[PAGE_SIZE - 1].last_span_at.isoformat() if len(rows) > PAGE_SIZE else None
    params = request.GET.copy()
    params.pop("before", None)
    return render(
        request,
        "traces/sessions.html",
        {
            "sessions": rows[:PAGE_SIZE],
            "older": older,
            "filters": params.urlencode(),
            "ranges": RANGES,
            "chosen_range": chosen_range,
            "evaluators": Evaluator.objects.for_user(request.user, request.project).only("pk", "name"),
            "score_choices": ("pass", "fail", "error"),
        },
    )


@login_required
def session_detail(request, session_id):
    """The session's trajectory: its steps in order, a page at a time, filtered; HTMX "load more" gets the next page alone."""
    session = get_scoped_or_404(request, TraceSession.objects.for_user(request.user, request.project).select_related("run"), session_id=session_id)
    try:
        # Read once for the steps' costs and the summary's.
        prices = trajectory.model_prices(session.project_id)
        steps, cursor = trajectory.steps_page(session, request.GET, prices=prices)
    except trajectory.BadStepFilter as exc:
        return bad_request(request, message=str(exc), back=reverse("traces:session", args=[session.session_id]))
    trajectory.place_on_timeline(steps, session)
    params = request.GET.copy()
    params.pop("after", None)
    context = {"session": session, "steps": steps, "cursor": cursor, "filters": params.urlencode()}
    if request.htmx:
        return render(request, "traces/_steps.html", context)
    tasks = list(session.tasks.select_related("group"))
    context |= {
        "tasks": tasks,
        "summary": trajectory.summary([session], prices),
        "kinds": trajectory.KINDS,
        "quiet_seconds": settings.TRACE_QUIET_SECONDS,
        "filtered": any(request.GET.get(k) for k in ("kind", "task", "errors", "q")),
        "scores": session_scores(session),
    }
    return render(request, "traces/session.html", context)


@login_required
def session_diff(request):
    """Two sessions side by side: ?s=A&s=B (the session list's two ticks, or the run page's pick)."""
    chosen = [s for s in request.GET.getlist("s") if s][:3]
    if len(chosen) != 2:
        return bad_request(
            request,
            message=f"A diff needs two sessions; {len(chosen) or 'none'} {'was' if len(chosen) == 1 else 'were'} chosen. Tick two on the sessions list, then Compare.",
            back=reverse("traces:sessions"),
        )
    scoped = TraceSession.objects.for_user(request.user, request.project)
    a, b = (get_scoped_or_404(request, scoped, session_id=session_id) for session_id in chosen)
    # Each step links to its place in its trajectory: the two pages' addresses, once rather than per step.
    urls = {f"url_{side}": reverse("traces:session", args=[s.session_id]) for side, s in (("a", a), ("b", b))}
    result = diff.diff(a, b)
    first = None if result["first_divergence"] is None else result["first_divergence"] + 1
    return render(
        request, "traces/diff.html", {"session_a": a, "session_b": b, "diff": result, "rows": diff.collapsed(result["rows"]), "first_row": first, **urls}
    )


@login_required
def groups(request):
    groups = task_groups_with_stats(request.user, request.project).order_by("-created_at", "-pk")
    return render(request, "traces/groups.html", listing(request, TaskGroupFilter, groups))


@login_required
def group_training_data(request, pk):
    group = get_scoped_or_404(request, TaskGroup.objects.for_user(request.user, request.project), pk=pk)
    try:
        return training_data_response(request.project, group, request.GET)
    except (BadFilter, IndexUnavailable) as exc:
        return HttpResponse(str(exc), status=exc.status_code, content_type="text/plain; charset=utf-8")


@login_required
def group_overlaps(request, pk):
    """The tasks of the group's export that the benchmark check leaves out, by benchmark (read in full: a check of the whole export)."""
    group = get_scoped_or_404(request, TaskGroup.objects.for_user(request.user, request.project), pk=pk)
    try:
        report = overlap_report(request.project, group, request.GET)
    except (BadFilter, IndexUnavailable) as exc:
        return HttpResponse(str(exc), status=exc.status_code, content_type="text/plain; charset=utf-8")
    dates = {k: request.GET[k] for k in ("since", "until") if request.GET.get(k)}
    return render(request, "traces/overlaps.html", {"group": group, "dates": urlencode(dates), **report})
