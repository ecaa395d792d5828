"""Monitors created and changed, with every field checked first (MonitorError, 400, naming the field), and run now."""

import base64
import hashlib
import hmac
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from evals.models import Deployment, SuiteRun
from evals.suites.actions import SuiteError, entries_of
from evals.validation import validate_deployment_url

from . import schedule
from .models import Monitor, MonitorRun

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
}


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
    if "name" in data or monitor is None:
        name = (data.get("name") or "").strip()
        if not name or len(name) > 100:
            raise MonitorError("name", "A monitor needs a name of 1 to 100 characters.")
        if Monitor.objects.filter(project=project, name=name).exclude(pk=monitor.pk if monitor else None).exists():
            raise MonitorError("name", f"This project already has a monitor named {name}.")
        checked["name"] = name
    if "suite" in data or monitor is None:
        suite = (data.get("suite") or "").strip()
        try:
            entries_of(project, suite)
        except SuiteError as exc:
            raise MonitorError("suite", str(exc)) from None
        checked["suite_name"] = suite
    if "deployment" in data or monitor is None:
        checked["deployment"] = _deployment(project, data.get("deployment"), "deployment")
    if "judge" in data:
        checked["judge"] = _deployment(project, data["judge"], "judge") if data["judge"] not in (None, "") else None
    if "cron" in data or monitor is None:
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
    monitor.next_run_at = schedule.following(monitor.cron, timezone.now())
    try:
        monitor.save()
    except IntegrityError:
        raise MonitorError("name", f"This project already has a monitor named {monitor.name}.") from None
    return monitor


def update_monitor(monitor: Monitor, data: dict) -> Monitor:
    checked = _check(monitor.project, data, monitor)
    for name, value in checked.items():
        setattr(monitor, name, value)
    if "cron" in checked or checked.get("enabled"):
        # A changed schedule, or one resumed, counts from now: what it missed while paused is not made up.
        monitor.next_run_at = schedule.following(monitor.cron, timezone.now())
    monitor.save()
    return monitor


def rotate_secret(monitor: Monitor) -> str:
    Monitor.objects.filter(pk=monitor.pk).update(webhook_secret_version=monitor.webhook_secret_version + 1)
    monitor.refresh_from_db()
    return webhook_secret(monitor)


def run_now(monitor: Monitor) -> MonitorRun:
    """A run outside the schedule (the schedule itself is unchanged); refused while one is still running."""
    from .runs import start

    with transaction.atomic():
        Monitor.objects.select_for_update().get(pk=monitor.pk)
        if busy := monitor.runs.filter(verdict=MonitorRun.Verdict.PENDING).first():
            raise MonitorError("monitor", f"{monitor.name} has a run in progress (due {busy.due_at:%Y-%m-%d %H:%M} UTC): wait for it to end.")
        run = MonitorRun.objects.create(monitor=monitor, due_at=timezone.now(), manual=True)
    start(run)
    run.refresh_from_db()
    return run
