"""Live monitors: a rate on live traffic watched outcome by outcome with a CUSUM (cusum.py), or a session measure
held to a hard limit.

Rates: an evaluator's pass rate (a score of 0.5 or more passes; its scores
taken by id, so one stored late is still counted once), or the sessions'
reported success rate (outcomes taken in the order they were reported). The
reference rate p0 is the one given, or learned from the first WARMUP outcomes
(which the detector then skips: they are its yardstick, not evidence). The
threshold follows from p0, p1 = p0 - min_drop and the outcomes a month over
the false alarms a month. When the sum passes it, an alert opens; it resolves
when the sum is back at 0 (the rate has held long enough to cancel the
evidence). A `floor` on the last 24 hours' rate is a hard limit besides.

Measures (tokens per session, the sessions' p95 duration): the last 24 hours
against a `ceiling`, the hard limits a team sets for cost and latency.
"""

import math
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Avg, Count, F, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from evals import statistics
from traces.models import EvaluatorScore, TraceSession

from . import alerts, cusum
from .models import Alert, Monitor

WARMUP = 200
BATCH = 20_000
SETTLE = timedelta(seconds=10)
FLOOR_MIN = 20  # outcomes in 24 hours before a floor or a ceiling is judged
PASS = 0.5
Metric = Monitor.Metric
RATES = (Metric.PASS_RATE, Metric.SUCCESS_RATE)


@dataclass
class Outcome:
    passed: bool
    pk: int
    at: object = None


def outcomes(monitor: Monitor):
    """The rate's outcomes, as a queryset with `passed` and `at` (when it happened)."""
    if monitor.metric == Metric.PASS_RATE:
        found = EvaluatorScore.objects.filter(evaluator_id=monitor.evaluator_id, status=EvaluatorScore.Status.SCORED, value__isnull=False)
        return found.annotate(passed=Q(value__gte=PASS), at=F("session_at"), stored=F("scored_at"))
    found = TraceSession.objects.filter(project_id=monitor.project_id, outcome__in=[TraceSession.Outcome.SUCCESS, TraceSession.Outcome.FAIL])
    return found.annotate(passed=Q(outcome=TraceSession.Outcome.SUCCESS), at=F("last_span_at"), stored=F("outcome_at"))


def new_outcomes(monitor: Monitor, now) -> list[Outcome]:
    """What was stored since the detector last looked, in the order it was stored.

    The cursor is (when stored, id): a judge score retried later is stored again (its scored_at moves) and
    counted then, once it has a value. Rows younger than SETTLE are left for the next tick: a row whose
    transaction commits after a newer one's would otherwise fall behind the cursor unseen.
    """
    found = outcomes(monitor).filter(stored__lte=now - SETTLE)
    if monitor.checked_at is not None:
        found = found.filter(Q(stored__gt=monitor.checked_at) | Q(stored=monitor.checked_at, pk__gt=monitor.checked_pk))
    rows = found.order_by("stored", "pk").values_list("passed", "pk", "stored")[:BATCH]
    return [Outcome(passed, pk, at) for passed, pk, at in rows]


def start_from_now(monitor: Monitor, now):
    """A new live monitor (or one given another evaluator) watches what is stored from now on, not the past."""
    latest = outcomes(monitor).filter(stored__lte=now).order_by("-stored", "-pk").values_list("stored", "pk").first()
    monitor.checked_at, monitor.checked_pk = latest if latest else (now, 0)
    monitor.cusum = 0.0


def per_month(monitor: Monitor, now) -> int:
    return max(outcomes(monitor).filter(stored__gte=now - timedelta(days=30)).count(), WARMUP)


def settings_of(monitor: Monitor, now) -> dict | None:
    """p0, p1, the threshold h and the ARL0 it was set for; None for a measure, or while the reference is being learned."""
    if monitor.metric not in RATES or monitor.reference_rate is None:
        return None
    p0 = min(max(monitor.reference_rate, 0.01), 0.99)
    p1 = max(p0 - monitor.min_drop, 0.005)
    month = per_month(monitor, now)
    # Two significant figures: the threshold is cached per (p0, p1, ARL0), and the count moves every tick.
    arl0 = float(f"{month / monitor.false_alarms_per_month:.2g}")
    return {"p0": p0, "p1": p1, "h": cusum.threshold(round(p0, 3), round(p1, 3), arl0), "arl0": arl0, "per_month": month}


def check_all(now=None) -> int:
    """Scheduled with the tick: every enabled live monitor looks at what arrived; how many moved."""
    now = now or timezone.now()
    live = Monitor.objects.filter(kind=Monitor.Kind.LIVE, enabled=True).exclude(metric=Metric.PASS_RATE, evaluator__isnull=True)
    return sum(check(pk, now) for pk in live.values_list("pk", flat=True))


def check(pk: int, now) -> bool:
    with transaction.atomic():
        monitor = Monitor.objects.select_for_update(skip_locked=True, of=("self",)).select_related("evaluator").filter(pk=pk).first()
        if monitor is None:
            return False
        if monitor.metric not in RATES:
            _check_ceiling(monitor, now)
            return True
        new = new_outcomes(monitor, now)
        if monitor.reference_rate is None:
            if len(new) < WARMUP:
                return False  # still learning: nothing is taken until WARMUP outcomes are in
            learned, new = new[:WARMUP], new[WARMUP:]
            monitor.reference_rate = min(max(sum(o.passed for o in learned) / WARMUP, 0.01), 0.99)
            _move_cursor(monitor, learned[-1])
        found = settings_of(monitor, now)
        before = total = monitor.cusum
        _, ceiling = cusum.increments(found["p0"], found["p1"])
        for outcome in new:
            # Held just over h once past it: evidence piled up during a long drop must not take thousands
            # of passes to cancel once the rate is back.
            total = min(cusum.step(total, outcome.passed, found["p0"], found["p1"]), found["h"] + ceiling)
        if new:
            _move_cursor(monitor, new[-1])
        monitor.cusum, monitor.cusum_h = total, found["h"]
        monitor.save(update_fields=["reference_rate", "checked_pk", "checked_at", "cusum", "cusum_h"])
        if before <= found["h"] < total:  # an alert when the evidence crosses the threshold, not every minute it stays over
            alerts.raise_alert(monitor, Alert.Kind.REGRESSED, f"{monitor.name}: {_rate_name(monitor)} fell on {monitor.watched}", _fell(monitor, found, now))
        elif total == 0:
            alerts.resolve_open(monitor, [Alert.Kind.REGRESSED])
        _check_floor(monitor, now)
        return bool(new)


def _move_cursor(monitor: Monitor, last: Outcome):
    monitor.checked_pk, monitor.checked_at = last.pk, last.at


def _rate_name(monitor: Monitor) -> str:
    return "pass rate" if monitor.metric == Metric.PASS_RATE else "success rate"


def recent(monitor: Monitor, since) -> tuple[int, int]:
    """(outcomes, passes) since a time, one aggregate."""
    found = outcomes(monitor).filter(stored__gte=since).aggregate(count=Count("pk"), passes=Count("pk", filter=Q(passed=True)))
    return found["count"], found["passes"]


def _fell(monitor: Monitor, found: dict, now) -> str:
    n, passed = recent(monitor, now - timedelta(days=1))
    if n:
        interval = statistics.wilson(passed, n)
        day = f"the last 24 hours passed {passed / n:.1%} of {n:,} (95 % interval {interval.low:.1%}–{interval.high:.1%})"
    else:
        day = "nothing arrived in the last 24 hours"
    return (
        f"The {_rate_name(monitor)} of {monitor.watched} is below its reference {found['p0']:.1%}: {day}. "
        f"The detector (a CUSUM for a drop to {found['p1']:.1%}) passed its threshold {found['h']:.2f}, set for "
        f"{monitor.false_alarms_per_month:g} false alarms a month at {found['per_month']:,} a month."
    )


def _breached(monitor: Monitor, title: str, message: str):
    """A hard limit passed: an alert, unless one is open already (the limit is checked every minute; a breach is one event)."""
    if not Alert.objects.filter(monitor=monitor, kind=Alert.Kind.LIMIT).open().exists():
        alerts.raise_alert(monitor, Alert.Kind.LIMIT, title, message)


def _check_floor(monitor: Monitor, now):
    if monitor.floor is None:
        return
    n, passed = recent(monitor, now - timedelta(days=1))
    if n < FLOOR_MIN:
        return
    if passed / n < monitor.floor:
        message = f"The last 24 hours passed {passed / n:.1%} of {n:,}, below the floor of {monitor.floor:.1%}."
        _breached(monitor, f"{monitor.name}: below its floor on {monitor.watched}", message)
    else:
        alerts.resolve_open(monitor, [Alert.Kind.LIMIT])


def measure(monitor: Monitor, now) -> tuple[float | None, int]:
    """The last 24 hours' tokens per session (mean) or session duration p95 (seconds), and how many sessions."""
    sessions = TraceSession.objects.filter(project_id=monitor.project_id, last_span_at__gte=now - timedelta(days=1))
    if monitor.metric == Metric.TOKENS:
        found = sessions.aggregate(n=Count("pk"), mean=Avg(F("input_tokens") + F("output_tokens")))
        return found["mean"], found["n"]
    durations = sorted((last - first).total_seconds() for first, last in sessions.values_list("first_span_at", "last_span_at")[:100_000])
    if not durations:
        return None, 0
    return durations[math.ceil(0.95 * len(durations)) - 1], len(durations)


def _check_ceiling(monitor: Monitor, now):
    if monitor.ceiling is None:
        return
    value, n = measure(monitor, now)
    if value is None or n < FLOOR_MIN:
        return
    if value > monitor.ceiling:
        label = Metric(monitor.metric).label
        message = f"{label}: {value:,.1f} over {n:,} sessions, past the limit of {monitor.ceiling:,.1f}."
        _breached(monitor, f"{monitor.name}: past its limit on {monitor.watched}", message)
    else:
        alerts.resolve_open(monitor, [Alert.Kind.LIMIT])


def daily(monitor: Monitor, days: int = 30) -> list[dict]:
    """A rate per day (by when it happened) with Wilson intervals, for the page's chart."""
    if monitor.metric not in RATES:
        return []
    rows = (
        outcomes(monitor)
        .filter(at__gte=timezone.now() - timedelta(days=days))
        .annotate(day=TruncDate("at"))
        .values("day")
        .annotate(count=Count("pk"), passes=Count("pk", filter=Q(passed=True)))
        .order_by("day")
    )
    return [
        {"day": r["day"], "n": r["count"], "rate": r["passes"] / r["count"], "interval": statistics.wilson(r["passes"], r["count"]).as_list()} for r in rows
    ]
