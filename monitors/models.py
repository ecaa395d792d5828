"""Monitors: a suite run on a cron schedule against one deployment, each run judged paired against a baseline, and the
alerts (with their deliveries) that a regression, a failed run or a skipped one opens."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from belvedir.core.models import ProjectScopedQuerySet


class Monitor(models.Model):
    """A suite on a schedule against a deployment (`suite`), or an evaluator's pass rate on live traffic (`live`)."""

    class Kind(models.TextChoices):
        SUITE = "suite", "Suite on a schedule"
        LIVE = "live", "Live pass rate"

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="monitors")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=5, choices=Kind.choices, default=Kind.SUITE)
    # A built-in suite (quick, core) or one of the project's own, read when each run starts.
    suite_name = models.CharField(max_length=100, blank=True)
    deployment = models.ForeignKey("evals.Deployment", null=True, blank=True, on_delete=models.CASCADE, related_name="monitors")
    judge = models.ForeignKey("evals.Deployment", null=True, blank=True, on_delete=models.PROTECT, related_name="judged_monitors")
    cron = models.CharField(max_length=100, blank=True, help_text="Five fields, minute to weekday, in UTC: 0 3 * * * is every night at 03:00.")
    # None: each run is compared with the last run that passed (the first run becomes the baseline).
    baseline = models.ForeignKey("evals.SuiteRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    monthly_budget = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)])
    # The sensitivity, in the user's terms: the smallest drop worth an alert (a fraction of the benchmark's
    # scale) and how many false alarms a month the team accepts. monitors/sensitivity.py derives the rest.
    min_drop = models.FloatField(default=0.03, validators=[MinValueValidator(0.001), MaxValueValidator(1)])
    false_alarms_per_month = models.FloatField(default=0.3, validators=[MinValueValidator(0.01), MaxValueValidator(30)])
    webhook_url = models.URLField(max_length=500, blank=True)
    # The signing secret is derived from SECRET_KEY, this monitor and this counter, never stored: rotating bumps it.
    webhook_secret_version = models.PositiveIntegerField(default=1)
    email_members = models.BooleanField(default=True)
    enabled = models.BooleanField(default=True)
    next_run_at = models.DateTimeField(null=True, blank=True)

    # A live monitor (monitors/live.py): a rate watched with a CUSUM (an evaluator's pass rate, or the sessions'
    # reported success rate), its reference given or learned from the first scores, the threshold following from
    # it and the false alarms a month; or a session measure held to a hard `ceiling` over the last 24 hours.
    class Metric(models.TextChoices):
        PASS_RATE = "pass_rate", "An evaluator's pass rate"
        SUCCESS_RATE = "success_rate", "Sessions' reported success rate"
        TOKENS = "tokens", "Tokens per session (last 24 h mean)"
        DURATION_P95 = "duration_p95", "Session duration p95 (last 24 h, seconds)"

    metric = models.CharField(max_length=12, choices=Metric.choices, blank=True)
    evaluator = models.ForeignKey("traces.Evaluator", null=True, blank=True, on_delete=models.CASCADE, related_name="monitors")
    ceiling = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0)], help_text="A hard limit on a session measure.")
    checked_at = models.DateTimeField(null=True, blank=True)  # the success rate's cursor: the last outcome taken
    reference_rate = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.01), MaxValueValidator(0.99)])
    floor = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(1)], help_text="A hard limit: a day's pass rate below it alerts."
    )
    cusum = models.FloatField(default=0.0)
    cusum_h = models.FloatField(null=True, blank=True)
    checked_pk = models.BigIntegerField(default=0)  # the last evaluator score the detector has taken
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_monitor_name_per_project")]
        indexes = [models.Index(fields=["next_run_at"], condition=Q(enabled=True), name="monitor_due")]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("monitors:detail", args=[self.pk])

    @property
    def watched(self) -> str:
        """What it watches, as its alerts name it: the deployment, or the evaluator on live traffic."""
        if self.kind == self.Kind.LIVE:
            if self.metric != self.Metric.PASS_RATE:
                return "this project's sessions"
            return f"the evaluator {self.evaluator.name}" if self.evaluator_id else "a deleted evaluator"
        return self.deployment.name if self.deployment_id else "a deleted deployment"


class MonitorRunQuerySet(ProjectScopedQuerySet):
    project_path = "monitor__project"


class MonitorRun(models.Model):
    class Verdict(models.TextChoices):
        PENDING = "pending", "Running"
        BASELINE = "baseline", "Baseline"
        PASSED = "passed", "Passed"
        REGRESSED = "regressed", "Regressed"
        IMPROVED = "improved", "Improved"
        INCONCLUSIVE = "inconclusive", "Inconclusive"
        FAILED = "failed", "Failed"
        SKIPPED = "skipped", "Skipped"

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="runs")
    # The schedule's time this run stands for: unique, so two workers never start one twice.
    due_at = models.DateTimeField()
    manual = models.BooleanField(default=False)
    suite_run = models.OneToOneField("evals.SuiteRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="monitor_run")
    baseline = models.ForeignKey("evals.SuiteRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    verdict = models.CharField(max_length=12, choices=Verdict.choices, default=Verdict.PENDING, db_index=True)
    reason = models.CharField(max_length=1000, blank=True)
    alpha = models.FloatField(null=True, blank=True)
    # Per benchmark: delta, its interval, p (Holm-adjusted), rows, the drop it could detect, rows that would decide it.
    benchmarks = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    objects = MonitorRunQuerySet.as_manager()

    class Meta:
        ordering = ["-due_at"]
        constraints = [models.UniqueConstraint(fields=["monitor", "due_at"], name="one_run_per_due_time")]

    def __str__(self):
        return f"{self.monitor} at {self.due_at:%Y-%m-%d %H:%M}"


class AlertQuerySet(ProjectScopedQuerySet):
    def open(self):
        return self.exclude(state=Alert.State.RESOLVED)


class Alert(models.Model):
    class Kind(models.TextChoices):
        REGRESSED = "regressed", "Regressed"
        FAILED = "failed", "Run failed"
        SKIPPED = "skipped", "Run skipped"
        LIMIT = "limit", "Past its limit"

    class State(models.TextChoices):
        OPEN = "open", "Open"
        ACKNOWLEDGED = "acknowledged", "Acknowledged"
        RESOLVED = "resolved", "Resolved"

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="alerts")
    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    state = models.CharField(max_length=12, choices=State.choices, default=State.OPEN)
    title = models.CharField(max_length=300)
    message = models.TextField()
    first_run = models.ForeignKey(MonitorRun, null=True, on_delete=models.SET_NULL, related_name="+")
    last_run = models.ForeignKey(MonitorRun, null=True, on_delete=models.SET_NULL, related_name="+")
    # Runs that found the same thing while it was open: deduplicated into this alert, not sent again.
    repeats = models.PositiveIntegerField(default=0)
    snoozed_until = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    opened_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)

    objects = AlertQuerySet.as_manager()

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            # Deduplicated while open: one unresolved alert of a kind per monitor.
            models.UniqueConstraint(fields=["monitor", "kind"], condition=~Q(state="resolved"), name="one_open_alert_per_kind"),
        ]

    def __str__(self):
        return self.title

    def get_absolute_url(self):
        return reverse("monitors:detail", args=[self.monitor_id]) + f"#alert-{self.pk}"

    @property
    def snoozed(self) -> bool:
        return self.snoozed_until is not None and self.snoozed_until > timezone.now()


class DeliveryQuerySet(ProjectScopedQuerySet):
    project_path = "alert__project"


class Delivery(models.Model):
    """One message about an alert (it opened, or it resolved) on one channel, retried with backoff until sent or failing."""

    class Channel(models.TextChoices):
        WEBHOOK = "webhook", "Webhook"
        EMAIL = "email", "Email"

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        SENT = "sent", "Sent"
        FAILING = "failing", "Failing"

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=10, default="opened")  # opened | resolved
    channel = models.CharField(max_length=7, choices=Channel.choices)
    state = models.CharField(max_length=7, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_error = models.CharField(max_length=500, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["pk"]
        indexes = [models.Index(fields=["next_attempt_at"], condition=Q(state="pending"), name="delivery_due")]

    def __str__(self):
        return f"{self.get_channel_display()} of {self.alert} ({self.event}): {self.state}"
