from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from belvedir.core.models import ProjectScopedQuerySet
from belvedir.sandbox.output import MASK
from belvedir.sandbox.owners import Owner

MAX_IN_FLIGHT = 100


class Deployment(models.Model):
    """An OpenAI-compatible endpoint serving one model."""

    class Style(models.TextChoices):
        CHAT = "chat", "Chat completions"
        COMPLETIONS = "completions", "Completions"

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="deployments")
    name = models.CharField(max_length=100)
    base_url = models.URLField(max_length=500, help_text="e.g. https://api.openai.com/v1")
    model = models.CharField(max_length=200)
    api_key = models.CharField(max_length=500, blank=True)
    api_style = models.CharField(max_length=12, choices=Style.choices, default=Style.CHAT)
    max_in_flight = models.PositiveIntegerField(default=MAX_IN_FLIGHT, validators=[MinValueValidator(1), MaxValueValidator(MAX_IN_FLIGHT)])
    input_price_per_million = models.DecimalField(
        "Input price per million tokens ($)", max_digits=10, decimal_places=4, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    output_price_per_million = models.DecimalField(
        "Output price per million tokens ($)", max_digits=10, decimal_places=4, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_deployment_name_per_project")]

    def __str__(self):
        return self.name

    @property
    def masked_key(self):
        return f"{self.api_key[:3]}{MASK}" if len(self.api_key) > 8 else (MASK if self.api_key else "")

    @property
    def is_priced(self):
        return self.input_price_per_million is not None or self.output_price_per_million is not None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> Decimal | None:
        """Dollars for this many tokens at the deployment's prices; None when it has none."""
        if not self.is_priced:
            return None
        dollars = (prompt_tokens or 0) * (self.input_price_per_million or 0) + (completion_tokens or 0) * (self.output_price_per_million or 0)
        return (Decimal(dollars) / 1_000_000).quantize(Decimal("0.000001"))


class Dataset(models.Model):
    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=100)
    row_count = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name


class DatasetRow(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="rows")
    index = models.PositiveIntegerField()
    input = models.TextField()
    expected = models.TextField()

    class Meta:
        ordering = ["index"]
        constraints = [models.UniqueConstraint(fields=["dataset", "index"], name="one_row_per_index")]

    def __str__(self):
        return f"row {self.index} of {self.dataset}"


class Eval(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        ERROR = "error"

    class Mode(models.TextChoices):
        # The model writes its answer, which the benchmark scores (chat or completions deployments).
        GENERATIVE = "generative"
        # Each option ranked by the log-likelihood a completions deployment echoes for it (multiple choice, as lm-eval).
        LOGLIKELIHOOD = "loglikelihood", "Log-likelihood"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="evals")
    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="evals")
    benchmark = models.CharField(max_length=50, blank=True)
    # The benchmark's version (its data files' SHA-256) when the eval was created: resumed or compared only on the same.
    benchmark_version = models.CharField(max_length=80, blank=True)
    # Every option of its benchmark (e.g. mbpp's challenge_tests) as this eval scores it, defaults included.
    benchmark_options = models.JSONField(default=dict, blank=True)
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.PROTECT, related_name="evals")
    scorers = models.JSONField(default=list, blank=True)
    mode = models.CharField(max_length=13, choices=Mode.choices, default=Mode.GENERATIVE)
    sample_limit = models.PositiveIntegerField(null=True, blank=True)
    seed = models.BigIntegerField()
    generation = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    status_message = models.CharField(max_length=1000, blank=True)
    total = models.PositiveIntegerField(default=0)
    done_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    score = models.FloatField(null=True, blank=True)
    # The score's 95% interval: Wilson for right/wrong rows, bootstrap for mean-valued ones.
    score_low = models.FloatField(null=True, blank=True)
    score_high = models.FloatField(null=True, blank=True)
    # Set when this eval was started on exactly the rows of another (same source, limit and seed).
    same_rows_as = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns")
    samples_per_problem = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(20)])
    pass_at_k = models.JSONField(default=dict, blank=True)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    max_cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)])
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When its message was last sent to the queue (evals.tasks.requeue_lost_evals).
    queued_at = models.DateTimeField(default=timezone.now)
    # Resumes after a stall since the last one a person asked for: bounded,
    # so an eval that kills its worker every time stops being re-queued.
    auto_resumes = models.PositiveSmallIntegerField(default=0)
    # Passes a worker claimed: 1 for an eval that ran through, more for one
    # resumed after a stall or continued past a pass's time limit.
    passes = models.PositiveIntegerField(default=0)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"Eval #{self.pk} {self.label}"

    def get_absolute_url(self):
        return reverse("evals:detail", args=[self.pk])

    @property
    def label(self):
        return self.benchmark or (self.dataset.name if self.dataset_id else "?")

    @property
    def is_active(self):
        return self.status in self.ACTIVE

    @property
    def owner(self) -> Owner:
        """Whose scoring sandbox and lease they are (humaneval)."""
        return Owner("eval", self.pk)

    @property
    def score_interval(self):
        return [self.score_low, self.score_high] if self.score_low is not None else None

    @property
    def total_tokens(self):
        return self.prompt_tokens + self.completion_tokens

    def source_key(self) -> tuple:
        """What decides which rows an eval scores, besides the row count: two evals equal here share rows."""
        return (self.benchmark, self.dataset_id, self.sample_limit, self.seed)

    @property
    def progress_pct(self):
        return round(100 * self.done_count / self.total) if self.total else 0

    @property
    def rate_per_s(self):
        if not self.started_at or not self.done_count:
            return None
        elapsed = ((self.finished_at or timezone.now()) - self.started_at).total_seconds()
        return self.done_count / elapsed if elapsed > 0 else None

    @property
    def eta_seconds(self):
        rate = self.rate_per_s
        return (self.total - self.done_count) / rate if rate and self.is_active else None

    @property
    def duration(self):
        return (self.finished_at - self.started_at) if self.started_at and self.finished_at else None


class Sample(models.Model):
    eval = models.ForeignKey(Eval, on_delete=models.CASCADE, related_name="samples")
    row_index = models.PositiveIntegerField()
    input = models.TextField()
    output = models.TextField(blank=True)
    extracted = models.TextField(blank=True)
    reference = models.TextField(blank=True)
    score = models.FloatField(null=True, blank=True)
    scores = models.JSONField(default=dict, blank=True)
    # The row's categories (axis -> value, e.g. {"subject": "anatomy", "group": "STEM"}): per-category scores group on it.
    category = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    prompt_tokens = models.IntegerField(null=True, blank=True)
    completion_tokens = models.IntegerField(null=True, blank=True)
    # pass@k: every completion of the row, [{"output", "passed", "detail"}], the first also in `output`.
    completions = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["row_index"]
        # Resume relies on this: a row scored once is never scored again.
        constraints = [models.UniqueConstraint(fields=["eval", "row_index"], name="one_sample_per_row")]

    @property
    def __str__(self):
        return f"row {self.row_index} of eval {self.eval_id}"

    def is_error(self):
        return bool(self.error)
