"""Monitor pages: the monitors with their open alerts, a monitor's history (a chart of each benchmark's delta against
its baseline, with intervals), its derived sensitivity, and the buttons that run, pause and silence it."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import OuterRef, Subquery
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from belvedir.core.charts import Series, line_chart
from belvedir.core.listing import paged
from belvedir.core.scoping import get_scoped_or_404

from . import actions, alerts, schedule, sensitivity
from .forms import MonitorForm
from .models import Alert, Monitor, MonitorRun
from .runs import spent_this_month

RUNS_PER_PAGE = 25


@login_required
def monitor_list(request):
    project = request.project
    form = MonitorForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        try:
            monitor = actions.create_monitor(project, request.user, form.as_data())
        except actions.MonitorError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        else:
            note = f"Monitor {monitor.name} saved: its first run is due {monitor.next_run_at:%Y-%m-%d %H:%M} UTC."
            if monitor.webhook_url:
                note += f" Webhook signing secret (shown once): {actions.webhook_secret(monitor)}"
            messages.success(request, note)
            return redirect(monitor)
    latest = MonitorRun.objects.filter(monitor=OuterRef("pk")).order_by("-due_at").values("pk")[:1]
    monitors = list(Monitor.objects.for_user(request.user, project).select_related("deployment").annotate(last_run_id=Subquery(latest)))
    last = MonitorRun.objects.in_bulk([m.last_run_id for m in monitors if m.last_run_id])
    for monitor in monitors:
        monitor.last = last.get(monitor.last_run_id)
    open_alerts = _shown(Alert.objects.for_user(request.user, project).open().select_related("monitor"))
    return render(request, "monitors/list.html", {"monitors": monitors, "open_alerts": open_alerts, "form": form}, status=400 if form.errors else 200)


def _shown(alerts_qs):
    """Open alerts, those snoozed last and marked."""
    now = timezone.now()
    found = list(alerts_qs[:200])
    return sorted(found, key=lambda a: a.snoozed_until is not None and a.snoozed_until > now)


@login_required
def monitor_detail(request, pk):
    monitor = get_scoped_or_404(request, Monitor.objects.for_user(request.user, request.project).select_related("deployment", "judge", "baseline"), pk=pk)
    runs = paged(request, monitor.runs.select_related("suite_run"), per_page=RUNS_PER_PAGE)
    decided = list(monitor.runs.exclude(benchmarks=[]).order_by("-due_at")[:60])[::-1]
    at_alpha = sensitivity.alpha(monitor.cron, monitor.false_alarms_per_month)
    context = {
        "monitor": monitor,
        **runs,
        "chart": history_chart(decided),
        "alpha_text": f"{at_alpha:.2g}",
        "runs_per_month": schedule.runs_per_month(monitor.cron),
        "plan": plan(monitor, decided[-1] if decided else None, at_alpha),
        "spent": spent_this_month(monitor, timezone.now()),
        "alerts": list(monitor.alerts.all()[:50]),
    }
    return render(request, "monitors/detail.html", context)


def plan(monitor: Monitor, last: MonitorRun | None, at_alpha: float) -> list[dict]:
    """Per benchmark of the last decided run: the rows it had, the drop they catch at this alpha, and the rows min_drop needs."""
    if last is None:
        n = sensitivity.rows_needed(monitor.min_drop, sensitivity.WORST_CASE_SD, at_alpha)
        return [{"benchmark": "any (before a first comparison, at the worst-case spread)", "n": None, "detectable_drop": None, "rows_needed": n}]
    return last.benchmarks


def history_chart(decided: list[MonitorRun]):
    """Each benchmark's delta against the baseline (points), run by run, with its interval; 0 is the baseline."""
    by_benchmark: dict[str, Series] = {}
    for run in decided:
        for entry in run.benchmarks:
            if entry.get("delta") is None:
                continue
            series = by_benchmark.setdefault(entry["benchmark"], Series(entry["benchmark"], [], intervals=[], labels=[]))
            series.points.append((run.due_at, entry["delta"] * 100))
            low, high = entry.get("delta_ci") or (entry["delta"], entry["delta"])
            series.intervals.append((low * 100, high * 100))
            series.labels.append(f"{run.get_verdict_display()} · {run.due_at:%Y-%m-%d %H:%M}")
    if not by_benchmark:
        return None
    return line_chart(list(by_benchmark.values()), y_label="delta vs baseline (points)")


@login_required
@require_POST
def monitor_action(request, pk, what):
    monitor = get_scoped_or_404(request, Monitor.objects.for_user(request.user, request.project), pk=pk)
    try:
        if what == "run":
            run = actions.run_now(monitor)
            messages.success(request, f"Started a run of {monitor.name}." if run.suite_run_id else f"Not started: {run.reason}")
        elif what in ("pause", "resume"):
            actions.update_monitor(monitor, {"enabled": what == "resume"})
            messages.success(request, f"{monitor.name} {'paused' if what == 'pause' else 'resumed'}.")
        elif what == "baseline":
            run = monitor.runs.filter(pk=request.POST.get("run") or 0, suite_run__isnull=False).first()
            if run is None:
                raise actions.MonitorError("baseline", "Choose a run of this monitor whose suite run is kept.")
            actions.update_monitor(monitor, {"baseline": run.suite_run})
            messages.success(request, f"Suite run #{run.suite_run_id} is the baseline now: the next runs are compared with it.")
        elif what == "rotate-secret":
            messages.success(request, f"New webhook signing secret (shown once): {actions.rotate_secret(monitor)}")
        elif what == "delete":
            name = monitor.name
            monitor.delete()
            messages.success(request, f"Monitor {name} deleted; its suite runs are kept.")
            return redirect("monitors:list")
    except actions.MonitorError as exc:
        messages.error(request, str(exc))
    return redirect(monitor)


@login_required
@require_POST
def alert_action(request, pk, what):
    alert = get_scoped_or_404(request, Alert.objects.for_user(request.user, request.project), pk=pk)
    if what == "ack":
        alerts.acknowledge(alert, request.user)
    elif what == "snooze":
        alerts.snooze(alert, timezone.now() + timedelta(hours=24))
    elif what == "resolve":
        alerts.resolve(alert)
    # Back to the page the button was on: the monitors list, or the alert's monitor.
    return redirect("monitors:list" if request.POST.get("next") == "list" else alert.get_absolute_url())
