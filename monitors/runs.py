"""The scheduler's tick: claim the monitors that are due, start their suite runs, and judge the runs that ended.

Claiming is one locking query per batch (`FOR UPDATE SKIP LOCKED`), one insert
of the batch's runs and one update of their next times: a second worker
skips what the first holds, and the unique (monitor, due time) holds even if
it did not. The next time counts from now, so a worker that was down three
nights runs a missed schedule once, not three times.

Each run is a suite run with the cache bypassed (a monitor measures the
deployment today, never an answer kept from before) on the baseline's rows, so
every benchmark pairs. It is skipped, with an alert, while the project is in
debt or the schedule has spent its monthly budget.

The baseline is the monitor's first run that succeeded (pinned then), or the
suite run someone pins; it never moves by itself. A baseline that followed
"the last run that passed" absorbs what it should catch: a real drop that one
run misses (at 80 % power, one in five) becomes the next baseline, and a slow
drift is never more than a night's worth against it; moving it on an
improvement instead makes a lucky run the yardstick, and every run after it
looks worse (bench/monitors.py shows the first).
"""

import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from billing.errors import InsufficientBalance
from evals.actions import EvalConfigError, EvalLimitReached
from evals.models import CacheMode, Eval
from evals.suites.actions import SuiteError, create_suite_run, progress
from evals.suites.comparison import compare_suite_runs

from . import alerts, schedule, sensitivity, verdicts
from .models import Alert, Monitor, MonitorRun

logger = logging.getLogger(__name__)
BATCH = 500
NEVER_STARTED = timedelta(minutes=10)
Verdict = MonitorRun.Verdict


def claim_due(now: datetime | None = None, batch: int = BATCH) -> list[MonitorRun]:
    """The runs of every monitor due by `now` (up to `batch`), created, their monitors' next times moved on.

    Three queries a batch whatever its size: the locking select, one update per distinct next time (monitors
    share a handful of crons, and croniter is asked once per cron, ~0.5 ms a call), the insert of the runs.
    """
    now = now or timezone.now()
    with transaction.atomic():
        due = list(
            Monitor.objects.select_for_update(skip_locked=True).filter(enabled=True, next_run_at__lte=now).values_list("pk", "cron", "next_run_at")[:batch]
        )
        if not due:
            return []
        following = {cron: schedule.following(cron, now) for cron in {cron for _, cron, _ in due}}
        moved = defaultdict(list)
        for pk, cron, _ in due:
            moved[following[cron]].append(pk)
        for when, pks in moved.items():
            Monitor.objects.filter(pk__in=pks).update(next_run_at=when)
        return MonitorRun.objects.bulk_create([MonitorRun(monitor_id=pk, due_at=due_at) for pk, _, due_at in due])


def spent_this_month(monitor: Monitor, now: datetime):
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return Eval.objects.filter(suite_run__monitor_run__monitor=monitor, created_at__gte=start).aggregate(total=Sum("cost"))["total"] or 0


def start(run: MonitorRun):
    """Start the run's suite run, or decide it skipped or failed (with its alert) when it cannot start."""
    monitor = Monitor.objects.select_related("project", "deployment", "judge", "created_by", "baseline").get(pk=run.monitor_id)
    now = timezone.now()
    max_cost = None
    if monitor.monthly_budget is not None:
        spent = spent_this_month(monitor, now)
        if spent >= monitor.monthly_budget:
            return _end(run, Verdict.SKIPPED, f"Skipped: this month's runs cost ${spent:.2f} of the ${monitor.monthly_budget:.2f} monthly budget.")
        if monitor.deployment.is_priced:
            max_cost = monitor.monthly_budget - spent
    if busy := monitor.runs.filter(verdict=Verdict.PENDING, suite_run__isnull=False).exclude(pk=run.pk).first():
        # Not an alert: a suite slower than its schedule is the schedule's problem, shown on the page.
        return _end(run, Verdict.SKIPPED, f"Skipped: the run due {busy.due_at:%Y-%m-%d %H:%M} UTC was still running.", alert=False)
    baseline = monitor.baseline  # None: this run is the first, and becomes it
    try:
        suite_run = create_suite_run(
            monitor.project,
            monitor.created_by,
            deployments=[monitor.deployment],
            suite_name=monitor.suite_name,
            judge=monitor.judge,
            same_rows_as=baseline,
            max_cost=max_cost,
            cache=CacheMode.BYPASS,
            notes=[f"Started by the monitor {monitor.name} (due {run.due_at:%Y-%m-%d %H:%M} UTC)."],
        )
    except InsufficientBalance:
        return _end(run, Verdict.SKIPPED, "Skipped: the project is in debt. Top up its balance and the next run goes ahead.")
    except EvalLimitReached as exc:
        return _end(run, Verdict.SKIPPED, f"Skipped: {exc}")
    except EvalConfigError as exc:  # SuiteError among them: the suite, its baseline's rows, a judge that does not answer
        return _end(run, Verdict.FAILED, f"Could not start: {exc}")
    MonitorRun.objects.filter(pk=run.pk).update(suite_run=suite_run, baseline=baseline)


def _end(run: MonitorRun, verdict: str, reason: str, *, alert: bool = True, benchmarks=None, alpha=None):
    with transaction.atomic():
        MonitorRun.objects.filter(pk=run.pk).update(verdict=verdict, reason=reason, benchmarks=benchmarks or [], alpha=alpha, decided_at=timezone.now())
        run.refresh_from_db()
        if alert:
            alerts.after(run)


def decide_ended(batch: int = 100) -> int:
    """Judge every pending run whose suite run has ended, and end those claimed but never started; how many."""
    # Claimed, then its worker died before the suite run was made: failed, saying so, so the next one is not refused.
    lost = MonitorRun.objects.filter(verdict=Verdict.PENDING, suite_run__isnull=True, created_at__lt=timezone.now() - NEVER_STARTED)
    lost.update(verdict=Verdict.FAILED, reason="Never started: its worker stopped before the suite run was made.", decided_at=timezone.now())
    ended = (
        MonitorRun.objects.filter(verdict=Verdict.PENDING, suite_run__isnull=False)
        .exclude(suite_run__evals__status__in=Eval.ACTIVE)
        .values_list("pk", flat=True)[:batch]
    )
    return sum(decide(pk) for pk in list(ended))


def decide(pk: int) -> bool:
    with transaction.atomic():
        run = (
            MonitorRun.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(pk=pk, verdict=Verdict.PENDING)
            .select_related("monitor", "suite_run")
            .first()
        )
        if run is None or run.suite_run is None or run.suite_run.evals.filter(status__in=Eval.ACTIVE).exists():
            return False
        monitor = run.monitor
        at_alpha = sensitivity.alpha(monitor.cron, monitor.false_alarms_per_month)
        stats = progress(run.suite_run)
        if run.baseline_id is None:
            if stats["evals"] and stats["succeeded"] == stats["evals"]:
                # Pinned, so that it stays the baseline until someone moves it (monitors/runs.py says why).
                Monitor.objects.filter(pk=monitor.pk, baseline__isnull=True).update(baseline=run.suite_run)
                _end(run, Verdict.BASELINE, "The first run: the next runs are compared with it until another is made the baseline.", alpha=at_alpha)
            else:
                _end(run, Verdict.FAILED, f"{stats['failed'] or 'Some'} of its {stats['evals']} evals did not succeed: no baseline yet.", alpha=at_alpha)
            return True
        try:
            result = compare_suite_runs(run.baseline, run.suite_run, deployment_a=_side(run.baseline, monitor), deployment_b=monitor.deployment)
        except SuiteError as exc:
            _end(run, Verdict.FAILED, f"Not compared with its baseline: {exc}", alpha=at_alpha)
            return True
        compared = [{**row, "failed": row["benchmark"] in result["failed"]} for row in result["benchmarks"]]
        decision = verdicts.decide(compared, at_alpha, monitor.min_drop)
        _end(run, decision.verdict, decision.reason, benchmarks=decision.benchmarks, alpha=at_alpha)
        return True


def _side(baseline, monitor: Monitor):
    """The baseline's deployment to compare with: the monitor's own when the baseline ran on it, else the baseline's only one."""
    if baseline.deployments.filter(pk=monitor.deployment_id).exists():
        return monitor.deployment
    return None


def tick(now: datetime | None = None) -> dict:
    """Scheduled every minute: start what is due, then judge what ended."""
    started = 0
    while runs := claim_due(now):
        for run in runs:
            try:
                start(run)
            except Exception:
                # One monitor's broken run must not stop the others of the batch.
                logger.exception("Monitor run %s could not start", run.pk)
                _end(run, Verdict.FAILED, "Could not start: an internal error (logged).")
            started += 1
        if len(runs) < BATCH:
            break
    from . import live

    return {"started": started, "decided": decide_ended(), "live": live.check_all(now), "open_alerts": Alert.objects.open().count()}
