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
from evals.suites.comparison import points

from . import actions, alerts, live, schedule, sensitivity
from .forms import LiveMonitorForm, MonitorForm
from .models import Alert, Monitor, MonitorRun
from .runs import spent_this_month

RUNS_PER_PAGE = 25


@login_required
def monitor_list(request):
    project = request.project
    form = MonitorForm(request.POST if "suite_monitor" in request.POST else None, project=project)
    live_form = LiveMonitorForm(request.POST if "live_monitor" in request.POST else None, project=project)
    posted = form if form.is_bound else live_form if live_form.is_bound else None
    if posted is not None and posted.is_valid():
        try:
            monitor = actions.create_monitor(project, request.user, posted.as_data())
        except actions.MonitorError as exc:
            posted.add_error(exc.field if exc.field in posted.fields else None, str(exc))
        else:
            note = (
                f"Monitor {monitor.name} saved: its first run is due {monitor.next_run_at:%Y-%m-%d %H:%M} UTC."
                if monitor.next_run_at
                else f"Monitor {monitor.name} saved: it watches {monitor.watched}'s scores from now on."
            )
            if monitor.webhook_url:
                note += f" Webhook signing secret (shown once): {actions.webhook_secret(monitor)}"
            messages.success(request, note)
            return redirect(monitor)
    latest = MonitorRun.objects.filter(monitor=OuterRef("pk")).order_by("-due_at").values("pk")[:1]
    monitors = list(Monitor.objects.for_user(request.user, project).select_related("deployment", "evaluator").annotate(last_run_id=Subquery(latest)))
    last = MonitorRun.objects.in_bulk([m.last_run_id for m in monitors if m.last_run_id])
    for monitor in monitors:
        monitor.last = last.get(monitor.last_run_id)
    open_alerts = _shown(Alert.objects.for_user(request.user, project).open().select_related("monitor"))
    context = {"monitors": monitors, "open_alerts": open_alerts, "form": form, "live_form": live_form}
    return render(request, "monitors/list.html", context, status=400 if posted is not None and posted.errors else 200)


def _shown(alerts_qs):
    """Open alerts, those snoozed last and marked."""
    now = timezone.now()
    found = list(alerts_qs[:200])
    return sorted(found, key=lambda a: a.snoozed_until is not None and a.snoozed_until > now)


@login_required
def monitor_detail(request, pk):
    monitor = get_scoped_or_404(
        request, Monitor.objects.for_user(request.user, request.project).select_related("deployment", "judge", "baseline", "evaluator"), pk=pk
    )
    if monitor.kind == Monitor.Kind.LIVE:
        return live_detail(request, monitor)
    runs = paged(request, monitor.runs.select_related("suite_run"), per_page=RUNS_PER_PAGE)
    decided = list(monitor.runs.exclude(benchmarks=[]).select_related("suite_run").order_by("-due_at")[:60])[::-1]
    at_alpha = sensitivity.alpha(monitor.cron, monitor.false_alarms_per_month)
    context = {
        "monitor": monitor,
        **runs,
        "chart": history_chart(decided),
        "alpha_text": f"{at_alpha:.2g}",
        "min_drop_points": f"{monitor.min_drop * 100:g}",
        "runs_per_month": schedule.runs_per_month(monitor.cron),
        "plan": plan(monitor, decided[-1] if decided else None, at_alpha),
        "spent": spent_this_month(monitor, timezone.now()),
        "alerts": list(monitor.alerts.all()[:50]),
    }
    return render(request, "monitors/detail.html", context)


def live_detail(request, monitor: Monitor):
    """A live monitor: its reference and threshold, the detector's sum now, and the pass rate per day with intervals."""
    now = timezone.now()
    days = live.daily(monitor)
    chart = None
    if days:
        rates = Series(
            "pass rate", [(d["day"], d["rate"]) for d in days], intervals=[tuple(d["interval"]) for d in days], labels=[f"{d['n']:,} scores" for d in days]
        )
        shown = [rates]
        if monitor.reference_rate is not None:
            shown.append(Series("reference", [(days[0]["day"], monitor.reference_rate), (days[-1]["day"], monitor.reference_rate)]))
        chart = line_chart(shown, y_label="rate")
    found = live.settings_of(monitor, now)
    p0, p1 = (found["p0"], found["p1"]) if found else (None, None)
    context = {
        "monitor": monitor,
        "min_drop_points": f"{monitor.min_drop * 100:g}",
        "found": found,
        "rates": {name: f"{value:.1%}" for name, value in {"p0": p0, "p1": p1, "floor": monitor.floor}.items() if value is not None},
        "measured": _measured(monitor, now),
        "warmup": live.WARMUP,
        "days": days,
        "chart": chart,
        "alerts": list(monitor.alerts.all()[:50]),
    }
    return render(request, "monitors/live.html", context)


def _measured(monitor: Monitor, now) -> dict | None:
    if monitor.metric in live.RATES:
        return None
    value, n = live.measure(monitor, now)
    return {"value": value, "n": n} if value is not None else None


def plan(monitor: Monitor, last: MonitorRun | None, at_alpha: float) -> list[dict]:
    """Per benchmark of the last decided run: the rows it had, the drop they catch at this alpha, the rows min_drop
    needs, and what a run at those rows would cost at the last run's cost a row (None for an unpriced deployment)."""
    if last is None:
        n = sensitivity.rows_needed(monitor.min_drop, sensitivity.WORST_CASE_SD, at_alpha)
        return [{"benchmark": "any (before a first comparison, at the worst-case spread)", "n": None, "detectable_drop": None, "rows_needed": n}]
    costs = {}
    if last.suite_run_id:
        for ev in last.suite_run.evals.filter(cost__isnull=False, done_count__gt=0):
            costs[ev.benchmark] = ev.cost / ev.done_count
    return [
        {
            **entry,
            # On the benchmark's own scale, as the comparison says it (points on 0-1, MT-Bench's 1-10 as its own).
            "detectable": points(entry["benchmark"], entry["detectable_drop"]).lstrip("+") if entry.get("detectable_drop") is not None else None,
            "cost_at_rows_needed": costs[entry["benchmark"]] * entry["rows_needed"] if entry["benchmark"] in costs and entry["rows_needed"] else None,
        }
        for entry in last.benchmarks
    ]


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
            chosen = request.POST.get("run", "")
            run = monitor.runs.filter(pk=int(chosen), suite_run__isnull=False).first() if chosen.isdigit() else None
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
