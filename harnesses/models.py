import enum
import json
import math

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from belvedir.core.models import ProjectScopedQuerySet
from belvedir.sandbox.models import ComputeType, EgressGrant
from belvedir.sandbox.output import MASK
from belvedir.sandbox.owners import Owner
from billing.actions import run_price_cents

from . import drivers

MAX_TIME_LIMIT_SECONDS = 3600
MAX_TASK_ROWS = 500


class Place(enum.IntFlag):
    """Where a run's output held one of its secrets (the values of Run.secret_places; found by harnesses.redaction)."""

    LOG = 1
    RESULTS = 2
    SPANS = 4


PLACE_NAMES = {Place.LOG: "log", Place.RESULTS: "results.json", Place.SPANS: "spans"}


class Preset(models.Model):
    """A catalog entry that prefills the New Harness form; editable by staff."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=100)
    description = models.TextField()
    repo_url = models.CharField(
        max_length=500, help_text="May start with {drivers}: this platform's /drivers (or the BELVEDIR_PRESET_ORG organisation when set)."
    )
    ref = models.CharField(max_length=200, blank=True)
    install_command = models.TextField()
    run_command = models.TextField()
    compute_type = models.CharField(max_length=3, choices=ComputeType.choices, default=ComputeType.CPU)
    gpu_type = models.CharField(max_length=40, blank=True)
    env_var_names = models.JSONField(default=list, blank=True, help_text='Names the harness needs, e.g. ["ANTHROPIC_API_KEY"].')
    needs_tasks = models.BooleanField(default=False, help_text="The preset brings no task suite: harnesses need Tasks.")
    local_model = models.BooleanField(default=False, help_text="Harnesses made from it get the local model, read-only (Harness.local_model).")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["position", "name"]

    def __str__(self):
        return self.name

    @property
    def resolved_repo_url(self):
        return self.repo_url.replace("{drivers}", drivers.base_url()).replace("{org}", settings.PRESET_REPO_ORG)


class HarnessQuerySet(ProjectScopedQuerySet):
    pass


class Harness(models.Model):
    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="harnesses")
    name = models.CharField(max_length=100)
    repo_url = models.CharField("Repository URL", max_length=500)
    ref = models.CharField("Branch, tag or commit", max_length=200, blank=True)
    install_command = models.TextField()
    run_command = models.TextField()
    compute_type = models.CharField(max_length=3, choices=ComputeType.choices, default=ComputeType.CPU)
    gpu_type = models.CharField("GPU type", max_length=40, blank=True, default="A10G")
    tasks = models.TextField(blank=True, help_text="Given to the run as the file named by FRACTAL_TASKS_FILE.")
    time_limit_seconds = models.PositiveIntegerField(
        default=MAX_TIME_LIMIT_SECONDS, validators=[MinValueValidator(10), MaxValueValidator(MAX_TIME_LIMIT_SECONDS)]
    )
    egress_domains = models.TextField(
        "Egress allowlist",
        blank=True,
        help_text="Only these domains (and their subdomains), one per line, besides the platform. Empty: the whole public internet.",
    )
    local_model = models.BooleanField(
        "Local model",
        default=False,
        help_text="Mount the platform's local model (SmolLM2-135M) and its runtime read-only at /opt/belvedir, to serve it, "
        "with a fine-tuned adapter, inside the sandbox on CPU (drivers/local-model).",
    )
    preset = models.ForeignKey(Preset, null=True, blank=True, on_delete=models.SET_NULL, related_name="harnesses")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = HarnessQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "harnesses"

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("harnesses:detail", args=[self.pk])

    @property
    def price_cents(self):
        return run_price_cents(self.compute_type)

    def egress_domain_list(self) -> list[str]:
        return [line.strip().lower().rstrip(".") for line in self.egress_domains.splitlines() if line.strip()]


class HarnessEnvVar(models.Model):
    harness = models.ForeignKey(Harness, on_delete=models.CASCADE, related_name="env_vars")
    name = models.CharField(max_length=100)
    value = models.TextField(blank=True)
    secret = models.BooleanField(default=False, help_text="Masked in pages, API responses and logs.")

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["harness", "name"], name="one_env_var_name_per_harness")]

    def __str__(self):
        return self.name

    @property
    def display_value(self):
        return MASK if self.secret else self.value


class RunQuerySet(ProjectScopedQuerySet):
    def active(self):
        return self.filter(status__in=Run.ACTIVE)


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        LAUNCHING = "launching"
        INSTALLING = "installing"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        TIMED_OUT = "timed_out", "Timed out"
        CANCELLED = "cancelled"
        LAUNCH_FAILED = "launch_failed", "Launch failed"
        ERROR = "error"

    ACTIVE = (Status.QUEUED, Status.LAUNCHING, Status.INSTALLING, Status.RUNNING)
    IN_SANDBOX = (Status.LAUNCHING, Status.INSTALLING, Status.RUNNING)

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="runs")
    harness = models.ForeignKey(Harness, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    compute_type = models.CharField(max_length=3, choices=ComputeType.choices)
    price_cents = models.PositiveIntegerField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    host = models.ForeignKey("sandbox.SandboxHost", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    api_key = models.ForeignKey("core.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    commit_sha = models.CharField(max_length=40, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True)
    model_label = models.CharField(max_length=200, blank=True)
    results = models.JSONField(null=True, blank=True)
    results_error = models.CharField(max_length=500, blank=True)
    status_message = models.CharField(max_length=1000, blank=True)
    log_tail = models.TextField(blank=True)
    extra_env = models.JSONField(default=dict, blank=True, help_text="Env added by whoever started the run (e.g. a model benchmark).")
    # Secret env added at start (HF_TOKEN, signed URLs): masked in logs, never shown.
    secret_env = models.JSONField(default=dict, blank=True)
    # Which of its secrets the run's output held, by env name, and where (Place flags):
    # {"API_TOKEN": 1}. Never a value. Empty while none did.
    secret_places = models.JSONField(default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # When its message was last sent to the queue (harnesses.tasks.requeue_lost_runs).
    queued_at = models.DateTimeField(default=timezone.now)
    launched_at = models.DateTimeField(null=True, blank=True)
    install_started_at = models.DateTimeField(null=True, blank=True)
    run_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["project", "-created_at"])]
        permissions = [("refund_run", "Can refund runs")]

    def __str__(self):
        return f"Run #{self.pk} of {self.harness_id}"

    def get_absolute_url(self):
        return reverse("harnesses:run", args=[self.pk])

    @property
    def is_active(self):
        return self.status in self.ACTIVE

    @property
    def duration(self):
        if not self.launched_at:
            return None
        return (self.finished_at or timezone.now()) - self.launched_at

    @property
    def results_pretty(self):
        return json.dumps(self.results, indent=2, sort_keys=True)

    def egress_grant(self):
        """What this run sent and was refused through the egress proxy (None on other networks)."""
        return EgressGrant.objects.for_owner(self.owner).prefetch_related("destinations").first()

    @property
    def base_score(self) -> float | None:
        """results.json's `base_score`: the base model's score in the same run (a driver benchmarking an adapter reports it)."""
        value = self.results.get("base_score") if isinstance(self.results, dict) else None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None

    @property
    def task_results(self) -> list[dict]:
        """results.json's `tasks` list (one entry per task a driver ran), as rows for the run page."""
        tasks = (self.results or {}).get("tasks") if isinstance(self.results, dict) else None
        if not isinstance(tasks, list):
            return []
        rows = []
        for item in tasks[:MAX_TASK_ROWS]:
            if isinstance(item, dict):
                rows.append(
                    {
                        "task": str(item.get("task", item.get("id", "")))[:500],
                        "check": str(item.get("check") or "")[:300],
                        "verdict": str(item.get("verdict", ""))[:40],
                        "steps": item.get("steps") if isinstance(item.get("steps"), int) else None,
                        "reason": str(item.get("reason") or "")[:300],
                    }
                )
        return rows

    @property
    def secrets_reached_output(self) -> list[dict]:
        """Which of its secrets reached the run's output and where, found there and redacted: [{"name": "API_TOKEN", "places": ["log"]}]."""
        return [
            {"name": name, "places": [label for place, label in PLACE_NAMES.items() if flags & place]}
            for name, flags in sorted(self.secret_places.items())
            if isinstance(flags, int) and flags
        ]

    @property
    def secret_reached_output(self) -> list[str]:
        """Where any of its secrets reached the run's output ("log", "results.json", "spans")."""
        flags = 0
        for value in self.secret_places.values():
            flags |= value if isinstance(value, int) else 0
        return [label for place, label in PLACE_NAMES.items() if flags & place]

    @property
    def secrets_report(self) -> str:
        """The secrets that reached its output, as a person reads them: "API_TOKEN in log; HF_TOKEN in log, spans"."""
        return "; ".join(f"{found['name']} in {', '.join(found['places'])}" for found in self.secrets_reached_output)

    @property
    def owner(self) -> Owner:
        """Whose sandbox, lease and egress grant they are (the ledger names a run by `harnesses.actions.RUNS.reference`)."""
        return Owner("run", self.pk)

    def timeline(self):
        steps = [
            ("Queued", self.created_at),
            ("Launching", self.launched_at),
            ("Installing", self.install_started_at),
            ("Running", self.run_started_at),
            (self.get_status_display().capitalize() if not self.is_active else "Finished", self.finished_at),
        ]
        return [(label, when) for label, when in steps if when]
