import json
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from belvedir.core.models import ProjectScopedQuerySet
from belvedir.sandbox.output import MASK
from belvedir.sandbox.owners import Owner

from . import serving

# The documented default of requests in flight per deployment, and the most a deployment may be given
# (vLLM serving a small model keeps gaining throughput past 256 in flight); the engine finds the level
# that works below it (evals/concurrency.py).
MAX_IN_FLIGHT = 100
MAX_IN_FLIGHT_CAP = 1024
RESPONSE_CACHE_TTL = 7 * 24 * 3600


class CacheMode(models.TextChoices):
    """Whether an eval reads and writes the project's response cache (evals/response_cache.py)."""

    AUTO = "auto", "Use the cache (not for sampled requests without a seed)"
    ALWAYS = "always", "Use the cache, sampled requests without a seed too"
    BYPASS = "bypass", "Bypass: ask the deployment, and keep its fresh answers"


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
    max_in_flight = models.PositiveIntegerField(
        default=MAX_IN_FLIGHT,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_IN_FLIGHT_CAP)],
        help_text=f"The most requests in flight at once (1-{MAX_IN_FLIGHT_CAP}); the engine finds the level the deployment keeps up with below it.",
    )
    cache_ttl_seconds = models.PositiveIntegerField(
        "Response cache time to live (s)", default=RESPONSE_CACHE_TTL, help_text="How long its cached answers are served; 0 caches nothing."
    )
    # What the server says it serves, as last seen: a digest of its /models entry (part of every cache key)
    # and its answers' system_fingerprint (a cached answer is served only under the same), so a model
    # changed behind the same name is a miss.
    served_fingerprint = models.CharField(max_length=200, blank=True)
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
    # Its latest version: every change to its rows makes the next one (evals/dataset_versions.py), and row_count is that version's.
    version = models.PositiveIntegerField(default=1)
    row_count = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("evals:dataset", args=[self.pk])


class DatasetVersion(models.Model):
    """One immutable state of a dataset's rows: how many, what changed since the version before, and who changed it."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    row_count = models.PositiveIntegerField(default=0)
    added = models.PositiveIntegerField(default=0)
    edited = models.PositiveIntegerField(default=0)
    removed = models.PositiveIntegerField(default=0)
    note = models.CharField(max_length=200, blank=True, help_text="What made it: an upload, an edit, rows from traces.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["dataset", "number"], name="one_version_number_per_dataset")]

    def __str__(self):
        return f"{self.dataset} v{self.number}"


class DatasetRow(models.Model):
    """A row's content over the versions [since_version, until_version) of its dataset (until_version empty: still there).

    An edit closes the row and stores the new content at the same position;
    a removal only closes it; rows a version leaves alone are not copied.
    """

    class InputFormat(models.TextChoices):
        TEXT = "text"
        # A JSON array of chat messages (a conversation up to a step): the eval sends them as they are.
        MESSAGES = "messages"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="rows")
    # Stable across versions and never reused once a row is removed: "row 12" names one row's history.
    position = models.PositiveIntegerField()
    input = models.TextField()
    input_format = models.CharField(max_length=8, choices=InputFormat.choices, default=InputFormat.TEXT)
    expected = models.TextField(blank=True)
    # Where it came from, e.g. {"source": "trace", "session_id", "task_id", "step", "span_id"}; a CSV's other columns.
    metadata = models.JSONField(default=dict, blank=True)
    since_version = models.PositiveIntegerField(default=1)
    until_version = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["position", "since_version"]
        constraints = [
            # Its index (dataset, position, ...) is what reads a version's rows in order.
            models.UniqueConstraint(fields=["dataset", "position", "since_version"], name="one_row_per_position_and_version"),
            models.UniqueConstraint(fields=["dataset", "position"], condition=models.Q(until_version__isnull=True), name="one_current_row_per_position"),
        ]
        # A diff reads the rows a version started and the ones it ended.
        indexes = [
            models.Index(fields=["dataset", "since_version"], name="dataset_row_started"),
            models.Index(fields=["dataset", "until_version"], name="dataset_row_ended"),
        ]

    def __str__(self):
        return f"row {self.position} of {self.dataset}"

    @property
    def messages(self) -> list | None:
        return json.loads(self.input) if self.input_format == self.InputFormat.MESSAGES else None


class Eval(models.Model):
    class Status(models.TextChoices):
        # A suite's eval waiting for its deployment's turn (evals.suites.advance): queued when the one before it ends.
        PENDING = "pending"
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

    ACTIVE = (Status.PENDING, Status.QUEUED, Status.RUNNING)

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="evals")
    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="evals")
    # The suite run that started it, if one did: its evals are that run's cells (benchmark x deployment).
    suite_run = models.ForeignKey("SuiteRun", null=True, blank=True, on_delete=models.CASCADE, related_name="evals")
    # A judged benchmark's judge (mt_bench): a deployment of the project, ideally not the one under test.
    judge = models.ForeignKey(Deployment, null=True, blank=True, on_delete=models.PROTECT, related_name="judged_evals")
    # Scored from this eval's stored outputs, without asking the deployment again (evals.actions.rescore_eval).
    rescored_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="rescores")
    # Each row asked this many times (the deployment's own sampling): per-row pass rates, flips and the noise floor (evals/noise.py).
    epochs = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(10)])
    benchmark = models.CharField(max_length=50, blank=True)
    # The benchmark's version (its data files' SHA-256) when the eval was created: resumed or compared only on the same.
    benchmark_version = models.CharField(max_length=80, blank=True)
    # Every option of its benchmark (e.g. mbpp's challenge_tests) as this eval scores it, defaults included.
    benchmark_options = models.JSONField(default=dict, blank=True)
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.PROTECT, related_name="evals")
    # The dataset's version it scores (DatasetVersion.number): its rows stay that version's, whatever the dataset becomes.
    dataset_version = models.PositiveIntegerField(null=True, blank=True)
    # A dataset eval's scorers, {"name": ..., "options": {...}} each (evals.scoring); empty for a benchmark eval.
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
    # The judge's own tokens (judged benchmarks and the llm_judge scorer), priced at the judge's prices.
    judge_prompt_tokens = models.BigIntegerField(default=0)
    judge_completion_tokens = models.BigIntegerField(default=0)
    # Everything the eval spent: the deployment's tokens (every attempt of every row) and the judge's.
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
    # The response cache (evals/response_cache.py): whether it is read, and how many requests it answered
    # (a hit: no request, no token paid) or had to send (a miss, or a request it may not answer).
    cache = models.CharField(max_length=6, choices=CacheMode.choices, default=CacheMode.AUTO)
    # Set by the engine when it sent a request sampled without a seed (response_cache.is_sampled): its answers are one
    # draw of many, so a suite under `auto` does not reuse the cell (suites/cells.py), as the response cache does not.
    sampled = models.BooleanField(default=False)
    cache_hits = models.PositiveIntegerField(default=0)
    cache_misses = models.PositiveIntegerField(default=0)
    # Its share of the deployment's max_in_flight while it runs, beside every other eval asking it (evals/shares.py),
    # and how many requests it could send now (its want: 0 once its pass ends).
    in_flight_share = models.PositiveIntegerField(default=0)
    in_flight_wanted = models.PositiveIntegerField(default=0)
    # The engine's requests in flight over time (evals/concurrency.py), for the eval page's chart:
    # [[seconds since the pass began, the level allowed, requests in flight, responses per second], ...].
    concurrency = models.JSONField(default=list, blank=True)
    # What its deployment's server said of itself as it answered (evals/serving.py): its Server header, its /models
    # entry's digest, the system_fingerprints of its answers, the most requests in flight at once. {}: not known.
    serving_stack = models.JSONField(default=dict, blank=True)
    # A suite cell reused instead of run (same benchmark version, data, deployment fingerprint,
    # generation settings, rows and epochs): the finished eval its samples were copied from.
    reused_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reuses")
    # What a reused cell is matched on (evals/suites/cells.py); "" for an eval that is no suite cell.
    cell_key = models.CharField(max_length=64, blank=True, db_index=True)
    # Stopping early (evals/sequential.py): against `decide_against` (same rows) with an always-valid test at
    # `decision_alpha`, or at an interval half-width of `precision_target`; `early_stop` says where and why.
    decide_against = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="decided_by")
    decision_alpha = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0001), MaxValueValidator(0.5)])
    precision_target = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0001), MaxValueValidator(0.5)])
    early_stop = models.JSONField(default=dict, blank=True)

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
    def serving_described(self) -> str:
        return serving.described(self.serving_stack)

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
    def catalog_entry(self):
        """Its benchmark in the catalog, or None for a dataset eval (or a benchmark since removed)."""
        from . import benchmarks

        return benchmarks.get(self.benchmark) if self.benchmark else None

    @property
    def chance(self) -> float | None:
        """What guessing scores on its benchmark (evals/benchmarks/base.py); None for a dataset or where unknown."""
        found = self.catalog_entry
        return found.chance if found is not None else None

    @property
    def scale(self) -> tuple[float, float]:
        found = self.catalog_entry
        return found.scale if found is not None else (0.0, 1.0)

    @property
    def chance_verdict(self) -> str:
        """Where its 95% interval lies against chance: "above", "within", "below", or "" where either is unknown."""
        chance, bounds = self.chance, self.score_interval
        if chance is None or not bounds:
            return ""
        return "within" if bounds[0] <= chance <= bounds[1] else "above" if bounds[0] > chance else "below"

    @property
    def against_chance(self) -> str:
        """Its interval against chance, in words: a 135M model's 0.26 on a four-choice test is not skill."""
        chance, verdict = self.chance, self.chance_verdict
        if verdict == "within":
            if chance == 0:
                return "Its 95% interval includes 0: on these rows the model is not shown to get any right."
            return f"Its 95% interval includes chance ({chance:g}): on these rows the model is not shown to do better than guessing."
        if verdict == "above":
            return f"Above chance ({chance:g}) by its whole 95% interval."
        if verdict == "below":
            return f"Below chance ({chance:g}) by its whole 95% interval: worse than guessing, often a format the model does not follow."
        return ""

    @property
    def judged_by_itself(self) -> bool:
        """The judge is the deployment under test: it grades its own answers, which judges are known to favour."""
        return self.judge_id is not None and self.judge_id == self.deployment_id

    @property
    def total_tokens(self):
        return self.prompt_tokens + self.completion_tokens

    @property
    def judge_total_tokens(self):
        return self.judge_prompt_tokens + self.judge_completion_tokens

    def source_key(self) -> tuple:
        """What decides which rows an eval scores, besides the row count: two evals equal here share rows."""
        return (self.benchmark, self.dataset_id, self.dataset_version, self.sample_limit, self.seed)

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
    judge_prompt_tokens = models.IntegerField(null=True, blank=True)
    judge_completion_tokens = models.IntegerField(null=True, blank=True)
    # pass@k and epochs: every completion of the row, [{"output", "score", "passed", "detail", "scores"}], the first also in `output`.
    completions = models.JSONField(default=list, blank=True)
    # Of its requests, those the response cache answered; its token counts are only those of requests sent.
    cache_hits = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["row_index"]
        # Resume relies on this: a row scored once is never scored again.
        constraints = [models.UniqueConstraint(fields=["eval", "row_index"], name="one_sample_per_row")]

    def __str__(self):
        return f"row {self.row_index} of eval {self.eval_id}"

    def is_error(self):
        return bool(self.error)

    @property
    def flipped(self) -> bool:
        """Over its epochs the row was both right and wrong (a pass rate strictly between 0 and 1)."""
        return len(self.completions) > 1 and self.score is not None and 0 < self.score < 1


class SampleAttempt(models.Model):
    """An errored try at a row, kept when the row is asked again (evals.actions.retry_errors): its tokens still count."""

    eval = models.ForeignKey(Eval, on_delete=models.CASCADE, related_name="attempts")
    row_index = models.PositiveIntegerField()
    error = models.TextField()
    output = models.TextField(blank=True)
    prompt_tokens = models.IntegerField(null=True, blank=True)
    completion_tokens = models.IntegerField(null=True, blank=True)
    judge_prompt_tokens = models.IntegerField(null=True, blank=True)
    judge_completion_tokens = models.IntegerField(null=True, blank=True)
    at = models.DateTimeField(help_text="When the errored try was stored.")

    class Meta:
        ordering = ["row_index", "at"]
        indexes = [models.Index(fields=["eval", "row_index"])]

    def __str__(self):
        return f"attempt at row {self.row_index} of eval {self.eval_id}"


class Suite(models.Model):
    """A project's own named list of benchmarks, each with its sample limit and mode (the built-in ones are in evals/suites.py)."""

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="suites")
    name = models.CharField(max_length=100)
    description = models.CharField(max_length=500, blank=True)
    # [{"benchmark", "sample_limit", "mode", "options"}], checked by evals.suites.parse_entries.
    entries = models.JSONField(default=list)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_suite_name_per_project")]

    def __str__(self):
        return self.name


class SuiteRun(models.Model):
    """A suite against one or more deployments as one object: one eval per benchmark and deployment."""

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="suite_runs")
    suite_name = models.CharField(max_length=100)
    # The suite's entries as they were when it ran: a later edit of the suite changes no run.
    entries = models.JSONField(default=list)
    deployments = models.ManyToManyField(Deployment, related_name="suite_runs")
    judge = models.ForeignKey(Deployment, null=True, blank=True, on_delete=models.PROTECT, related_name="judged_suite_runs")
    # Each benchmark's rows taken from this run's evals of it.
    same_rows_as = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns")
    # The budget of the whole suite: every eval stops once their costs together reach it.
    max_cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)])
    epochs = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(10)])
    cache = models.CharField(max_length=6, choices=CacheMode.choices, default=CacheMode.AUTO)
    # Run every cell, even one a finished eval of the project already answers (evals/suites/cells.py).
    force = models.BooleanField(default=False)
    # What the run left out and why (a judged benchmark of a built-in suite with no judge chosen).
    notes = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"Suite run #{self.pk} {self.suite_name}"

    def get_absolute_url(self):
        return reverse("evals:suite_run", args=[self.pk])


class JudgeLabel(models.Model):
    """A person's own grade of one judged verdict: the evidence a judge's calibration card is made of (evals/calibration.py)."""

    sample = models.ForeignKey(Sample, on_delete=models.CASCADE, related_name="labels")
    # The verdict labelled: a turn of a multi-turn benchmark (MT-Bench's 1 and 2), 1 otherwise.
    turn = models.PositiveSmallIntegerField(default=1)
    # Who the judge is: deployment, prompt and prompt version (evals.judges.Judge.key); the card groups on it.
    judge_key = models.CharField(max_length=200, db_index=True)
    judge_value = models.FloatField(help_text="The judge's grade of this verdict when it was labelled.")
    value = models.FloatField(help_text="The person's grade on the judge's scale (1-10, or 0/1).")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        # One label per person per verdict: a second one replaces the first.
        constraints = [models.UniqueConstraint(fields=["sample", "turn", "user"], name="one_label_per_verdict_and_person")]

    def __str__(self):
        return f"label of {self.sample} turn {self.turn}"


class CachedResponse(models.Model):
    """One deployment answer kept for its exact request (evals/response_cache.py), within one project.

    `key` is the whole request as canonical JSON (base URL, model, a digest of the credential, served fingerprint,
    path, body, attempt) and is compared in full on every hit: two requests sharing a hash can never share an answer.
    """

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="cached_responses")
    # Who asked: deleting the deployment deletes what it answered.
    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="cached_responses")
    key_hash = models.CharField(max_length=64)
    # What answered (response_cache.source_of: base URL, model and a digest of the credential): every deployment of
    # the project with the same three is served this answer, and clearing any of them clears it.
    source = models.CharField(max_length=64, blank=True, db_index=True)
    # The system_fingerprint the answer came with: served only while the deployment's is still the same.
    system_fingerprint = models.CharField(max_length=200, blank=True)
    key = models.TextField()
    body = models.BinaryField()
    size = models.PositiveIntegerField(help_text="Bytes of key and body: what the project's cap counts.")
    hits = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    last_hit_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "key_hash"], name="one_cached_response_per_request")]
        indexes = [models.Index(fields=["project", "created_at"], name="cached_response_age")]

    def __str__(self):
        return f"cached answer {self.key_hash[:12]} of {self.deployment}"
