"""Monitors created and changed, with every field checked first (MonitorError, 400, naming the field), and run now."""

import base64
import hashlib
import hmac
import logging
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from evals.models import Deployment, SuiteRun
from evals.suites.actions import SuiteError, entries_of
from evals.validation import validate_deployment_url
from traces.models import Evaluator

from . import live, schedule
from .models import Monitor, MonitorRun

logger = logging.getLogger(__name__)

FIELDS = {
    "name",
    "suite",
    "deployment",
    "judge",
    "cron",
    "baseline",
    "monthly_budget",
    "min_drop",
    "false_alarms_per_month",
    "webhook_url",
    "email_members",
    "enabled",
    "kind",
    "evaluator",
    "reference_rate",
    "floor",
    "metric",
    "ceiling",
}
SUITE_ONLY = {"suite", "deployment", "judge", "cron", "baseline", "monthly_budget"}
LIVE_ONLY = {"evaluator", "reference_rate", "floor", "metric", "ceiling"}


class MonitorError(ValueError):
    """A monitor that breaks a rule; the message names the field (400, with `field` in the body)."""

    status_code = 400

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.response_fields = {"field": field}


def webhook_secret(monitor: Monitor) -> str:
    """The key a receiver checks the signature with: derived, not stored, so the database never holds it."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"monitor-webhook:{monitor.pk}:{monitor.webhook_secret_version}".encode(), hashlib.sha256).digest()
    return "whsec_" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _check(project, data: dict, monitor: Monitor | None) -> dict:
    """The fields of a new monitor (all of them) or a change (those given), checked against the project."""
    if unknown := set(data) - FIELDS:
        raise MonitorError(sorted(unknown)[0], f"Unknown fields: {', '.join(sorted(unknown))}. Allowed: {', '.join(sorted(FIELDS))}.")
    checked = {}
    kind = data.get("kind") or (monitor.kind if monitor else Monitor.Kind.SUITE)
    if monitor is not None and kind != monitor.kind:
        raise MonitorError("kind", "A monitor's kind cannot change: make a new monitor.")
    if kind not in Monitor.Kind.values:
        raise MonitorError("kind", f"Unknown kind {str(kind)[:40]!r}: suite (a suite on a schedule) or live (an evaluator's pass rate).")
    checked["kind"] = kind
    foreign = {name for name in data if data[name] not in (None, "")} & (LIVE_ONLY if kind == Monitor.Kind.SUITE else SUITE_ONLY)
    if foreign:
        raise MonitorError(sorted(foreign)[0], f"A {kind} monitor takes no {', '.join(sorted(foreign))}.")
    if kind == Monitor.Kind.LIVE:
        checked.update(_check_live(project, data, monitor))
    if "name" in data or monitor is None:
        name = (data.get("name") or "").strip()
        if not name or len(name) > 100:
            raise MonitorError("name", "A monitor needs a name of 1 to 100 characters.")
        if Monitor.objects.filter(project=project, name=name).exclude(pk=monitor.pk if monitor else None).exists():
            raise MonitorError("name", f"This project already has a monitor named {name}.")
        checked["name"] = name
    if kind == Monitor.Kind.SUITE and ("suite" in data or monitor is None):
        suite = (data.get("suite") or "").strip()
        try:
            entries_of(project, suite)
        except SuiteError as exc:
            raise MonitorError("suite", str(exc)) from None
        checked["suite_name"] = suite
    if kind == Monitor.Kind.SUITE and ("deployment" in data or monitor is None):
        checked["deployment"] = _deployment(project, data.get("deployment"), "deployment")
    if "judge" in data:
        checked["judge"] = _deployment(project, data["judge"], "judge") if data["judge"] not in (None, "") else None
    if kind == Monitor.Kind.SUITE and ("cron" in data or monitor is None):
        try:
            checked["cron"] = schedule.check(data.get("cron") or "")
        except schedule.CronError as exc:
            raise MonitorError("cron", str(exc)) from None
    if "baseline" in data:
        checked["baseline"] = _baseline(project, data["baseline"])
    if data.get("monthly_budget") not in (None, ""):
        checked["monthly_budget"] = _number(data["monthly_budget"], "monthly_budget", low=Decimal(0), high=Decimal(10**6), kind=Decimal)
    elif "monthly_budget" in data:
        checked["monthly_budget"] = None
    if "min_drop" in data:
        checked["min_drop"] = _number(data["min_drop"], "min_drop", low=0.001, high=1.0, kind=float)
    if "false_alarms_per_month" in data:
        checked["false_alarms_per_month"] = _number(data["false_alarms_per_month"], "false_alarms_per_month", low=0.01, high=30.0, kind=float)
    if "webhook_url" in data:
        checked["webhook_url"] = _webhook_url(data["webhook_url"] or "")
    for flag in ("email_members", "enabled"):
        if flag in data:
            if not isinstance(data[flag], bool):
                raise MonitorError(flag, f"{flag} is true or false.")
            checked[flag] = data[flag]
    return checked


def _check_live(project, data: dict, monitor: Monitor | None) -> dict:
    """A live monitor's metric and what it needs: an evaluator for a pass rate, a ceiling for a session measure."""
    checked = {}
    metric = data.get("metric") or (monitor.metric if monitor else Monitor.Metric.PASS_RATE)
    if metric not in Monitor.Metric.values:
        raise MonitorError("metric", f"Unknown metric {str(metric)[:40]!r}: {', '.join(Monitor.Metric.values)}.")
    if monitor is not None and metric != monitor.metric:
        raise MonitorError("metric", "A monitor's metric cannot change: make a new monitor.")
    checked["metric"] = metric
    rate = metric in (Monitor.Metric.PASS_RATE, Monitor.Metric.SUCCESS_RATE)
    wrong = {name for name in (("ceiling",) if rate else ("evaluator", "reference_rate", "floor")) if data.get(name) not in (None, "")}
    if metric != Monitor.Metric.PASS_RATE and data.get("evaluator") not in (None, ""):
        wrong.add("evaluator")
    if wrong:
        raise MonitorError(sorted(wrong)[0], f"The metric {metric} takes no {', '.join(sorted(wrong))}.")
    if metric == Monitor.Metric.PASS_RATE and ("evaluator" in data or monitor is None):
        value = data.get("evaluator")
        if isinstance(value, Evaluator):
            found = value if value.project_id == project.pk else None
        else:
            found = Evaluator.objects.filter(project=project, **({"pk": value} if str(value).isdigit() else {"name": value})).first() if value else None
        if found is None:
            raise MonitorError("evaluator", f"evaluator: no evaluator {value!r} in this project (a pass rate is an evaluator's).")
        checked["evaluator"] = found
    if data.get("reference_rate") not in (None, ""):
        checked["reference_rate"] = _number(data["reference_rate"], "reference_rate", low=0.01, high=0.99, kind=float)
    elif "reference_rate" in data:
        checked["reference_rate"] = None
    if data.get("floor") not in (None, ""):
        checked["floor"] = _number(data["floor"], "floor", low=0.0, high=1.0, kind=float)
    elif "floor" in data:
        checked["floor"] = None
    if data.get("ceiling") not in (None, ""):
        checked["ceiling"] = _number(data["ceiling"], "ceiling", low=0.0, high=1e12, kind=float)
    elif not rate and monitor is None:
        raise MonitorError("ceiling", f"The metric {metric} is held to a hard limit: give its ceiling.")
    return checked


def _deployment(project, value, field: str) -> Deployment:
    found = None
    if isinstance(value, Deployment):
        found = value if value.project_id == project.pk else None
    elif isinstance(value, int) and not isinstance(value, bool):
        found = Deployment.objects.filter(project=project, pk=value).first()
    elif isinstance(value, str) and value:
        found = Deployment.objects.filter(project=project, name=value).first()
        if found is None and value.isdigit():
            found = Deployment.objects.filter(project=project, pk=int(value)).first()
    if found is None:
        raise MonitorError(field, f"{field}: no deployment {value!r} in this project.")
    return found


def _baseline(project, value) -> SuiteRun | None:
    if value in (None, ""):
        return None
    pk = value.pk if isinstance(value, SuiteRun) else value
    try:
        found = SuiteRun.objects.filter(project=project, pk=int(pk)).first()
    except (TypeError, ValueError):
        found = None
    if found is None:
        raise MonitorError("baseline", f"baseline: no suite run #{pk} in this project (leave it empty to compare with the last run that passed).")
    return found


def _number(value, field: str, *, low, high, kind):
    try:
        number = kind(str(value))
    except (ArithmeticError, TypeError, ValueError):
        raise MonitorError(field, f"{field} must be a number, not {str(value)[:40]!r}.") from None
    if not low <= number <= high:
        raise MonitorError(field, f"{field} must be between {low} and {high}, not {number}.")
    return number


def _webhook_url(url: str) -> str:
    url = url.strip()
    if not url:
        return ""
    if len(url) > 500:
        raise MonitorError("webhook_url", "webhook_url is at most 500 characters.")
    try:
        validate_deployment_url(url)
    except ValidationError as exc:
        raise MonitorError("webhook_url", "webhook_url: " + " ".join(exc.messages).replace("base URL", "URL")) from None
    return url


def create_monitor(project, user, data: dict) -> Monitor:
    checked = _check(project, data, None)
    monitor = Monitor(project=project, created_by=user, **checked)
    if monitor.kind == Monitor.Kind.SUITE:
        monitor.next_run_at = schedule.following(monitor.cron, timezone.now())
    else:
        live.start_from_now(monitor, timezone.now())
    try:
        monitor.save()
    except IntegrityError:
        raise MonitorError("name", f"This project already has a monitor named {monitor.name}.") from None
    return monitor


def update_monitor(monitor: Monitor, data: dict) -> Monitor:
    """Only the fields changed are written: the tick moves next_run_at (and a live monitor's detector) meanwhile,
    and a whole-row save from a page loaded before would put a claimed time back, to be run twice."""
    checked = _check(monitor.project, data, monitor)
    checked.pop("kind", None)
    checked.pop("metric", None)
    for name, value in checked.items():
        setattr(monitor, name, value)
    changed = set(checked)
    if monitor.kind == Monitor.Kind.LIVE and "evaluator" in changed:
        live.start_from_now(monitor, timezone.now())  # another evaluator's past is not this monitor's evidence
        monitor.reference_rate = checked.get("reference_rate")
        changed |= {"checked_at", "checked_pk", "cusum", "reference_rate"}
    elif monitor.kind == Monitor.Kind.LIVE and {"reference_rate", "min_drop", "false_alarms_per_month"} & changed:
        monitor.cusum = 0.0  # the evidence was for the old question: start again
        changed.add("cusum")
    if monitor.kind == Monitor.Kind.SUITE and {"suite_name", "deployment"} & changed and "baseline" not in checked:
        # Another suite or deployment: the pinned run is no yardstick for it; the next run that succeeds becomes one.
        monitor.baseline = None
        changed.add("baseline")
    if monitor.kind == Monitor.Kind.SUITE and ("cron" in changed or checked.get("enabled")):
        # A changed schedule, or one resumed, counts from now: what it missed while paused is not made up.
        monitor.next_run_at = schedule.following(monitor.cron, timezone.now())
        changed.add("next_run_at")
    if changed:
        monitor.save(update_fields=sorted(changed))
    return monitor


def rotate_secret(monitor: Monitor) -> str:
    Monitor.objects.filter(pk=monitor.pk).update(webhook_secret_version=monitor.webhook_secret_version + 1)
    monitor.refresh_from_db()
    return webhook_secret(monitor)


def run_now(monitor: Monitor) -> MonitorRun:
    """A run outside the schedule (the schedule itself is unchanged); refused while one is still running."""
    from .runs import start

    if monitor.kind != Monitor.Kind.SUITE:
        raise MonitorError("monitor", f"{monitor.name} watches live traffic: it has no runs to start.")
    with transaction.atomic():
        Monitor.objects.select_for_update().get(pk=monitor.pk)
        if busy := monitor.runs.filter(verdict=MonitorRun.Verdict.PENDING).first():
            raise MonitorError("monitor", f"{monitor.name} has a run in progress (due {busy.due_at:%Y-%m-%d %H:%M} UTC): wait for it to end.")
        run = MonitorRun.objects.create(monitor=monitor, due_at=timezone.now(), manual=True)
    try:
        start(run)
    except Exception:
        # As the tick does: a run that cannot start ends failed, never pending forever (which would refuse every later one).
        logger.exception("Monitor run %s could not start", run.pk)
        MonitorRun.objects.filter(pk=run.pk).update(
            verdict=MonitorRun.Verdict.FAILED, reason="Could not start: an internal error (logged).", decided_at=timezone.now()
        )
    run.refresh_from_db()
    return run
