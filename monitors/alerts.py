"""Alerts: opened by a run that regressed, failed or was skipped, deduplicated while open, resolved when a run recovers.

An alert opens once per kind and monitor (a partial unique constraint holds
it); a later run that finds the same thing counts as a repeat of it and sends
nothing. Each opening and each resolution is delivered once per channel
(deliveries.py): the signed webhook, email to the project's members, and
the in-app list, which is the alert itself.
"""

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from .models import Alert, Delivery, MonitorRun

Verdict, Kind = MonitorRun.Verdict, Alert.Kind

# What each verdict opens, and which open alerts it shows to have recovered.
OPENS = {Verdict.REGRESSED: Kind.REGRESSED, Verdict.FAILED: Kind.FAILED, Verdict.SKIPPED: Kind.SKIPPED}
RESOLVES = {
    Verdict.BASELINE: (Kind.REGRESSED, Kind.FAILED, Kind.SKIPPED),
    Verdict.PASSED: (Kind.REGRESSED, Kind.FAILED, Kind.SKIPPED),
    Verdict.IMPROVED: (Kind.REGRESSED, Kind.FAILED, Kind.SKIPPED),
    # No change found, but too few rows to say a regression is over: it stays open.
    Verdict.INCONCLUSIVE: (Kind.FAILED, Kind.SKIPPED),
    Verdict.REGRESSED: (Kind.FAILED, Kind.SKIPPED),
    Verdict.FAILED: (Kind.SKIPPED,),
    Verdict.SKIPPED: (),
}


def comparison_url(run: MonitorRun) -> str:
    if run.suite_run_id and run.baseline_id:
        return settings.BELVEDIR_BASE_URL + reverse("evals:suite_compare", args=[run.baseline_id, run.suite_run_id])
    return settings.BELVEDIR_BASE_URL + reverse("monitors:detail", args=[run.monitor_id])


def after(run: MonitorRun):
    """Open or repeat the alert the run's verdict calls for, and resolve those it shows recovered (inside the caller's transaction)."""
    monitor = run.monitor
    resolve_open(monitor, RESOLVES[run.verdict], run)
    if (kind := OPENS.get(run.verdict)) is None:
        return
    title = f"{monitor.name}: {Kind(kind).label.lower()} on {monitor.watched}"
    message = f"{run.reason}\n\nRun due {run.due_at:%Y-%m-%d %H:%M} UTC of the suite {monitor.suite_name}. Details: {comparison_url(run)}"
    raise_alert(monitor, kind, title, message, run)


def raise_alert(monitor, kind: str, title: str, message: str, run: MonitorRun | None = None) -> Alert:
    """A new alert of this kind, delivered; or, while one is open, that one with a repeat counted and nothing sent."""
    open_alert = Alert.objects.select_for_update().filter(monitor=monitor, kind=kind).open().first()
    if open_alert is not None:
        open_alert.repeats += 1
        open_alert.last_run = run or open_alert.last_run
        open_alert.save(update_fields=["repeats", "last_run"])
        return open_alert
    alert = Alert.objects.create(project_id=monitor.project_id, monitor=monitor, kind=kind, title=title[:300], message=message, first_run=run, last_run=run)
    _deliver(alert, "opened")
    return alert


def resolve_open(monitor, kinds, run: MonitorRun | None = None) -> int:
    """Resolve the monitor's open alerts of these kinds (it recovered), each resolution delivered."""
    resolved = 0
    for alert in Alert.objects.select_for_update().filter(monitor=monitor, kind__in=kinds).open():
        alert.state, alert.resolved_at, alert.last_run = Alert.State.RESOLVED, timezone.now(), run or alert.last_run
        alert.save(update_fields=["state", "resolved_at", "last_run"])
        _deliver(alert, "resolved")
        resolved += 1
    return resolved


def _deliver(alert: Alert, event: str):
    monitor = alert.monitor
    channels = []
    if monitor.webhook_url:
        channels.append(Delivery.Channel.WEBHOOK)
    if monitor.email_members:
        channels.append(Delivery.Channel.EMAIL)
    # Sent by the minute's delivery job (deliveries.py), never here: a slow webhook holds up no run.
    Delivery.objects.bulk_create([Delivery(alert=alert, event=event, channel=channel) for channel in channels])


def acknowledge(alert: Alert, user):
    if alert.state == Alert.State.OPEN:
        Alert.objects.filter(pk=alert.pk, state=Alert.State.OPEN).update(state=Alert.State.ACKNOWLEDGED, acknowledged_by=user)
        alert.refresh_from_db()


def snooze(alert: Alert, until):
    Alert.objects.filter(pk=alert.pk).update(snoozed_until=until)
    alert.refresh_from_db()


def resolve(alert: Alert):
    """Resolved by hand: the next run that finds the same opens a new alert."""
    if alert.state != Alert.State.RESOLVED:
        Alert.objects.filter(pk=alert.pk).exclude(state=Alert.State.RESOLVED).update(state=Alert.State.RESOLVED, resolved_at=timezone.now())
        alert.refresh_from_db()
