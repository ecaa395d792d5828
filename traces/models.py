import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import connection, models
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from belvedir.core.models import ProjectScopedQuerySet


class TraceSessionQuerySet(ProjectScopedQuerySet):
    def with_metadata(self, key: str, value: str):
        """Sessions whose metadata has key = value.

        On PostgreSQL a containment (`metadata @> {"key": "value"}`), which the
        GIN index answers; SQLite (development) has no @>, so it compares the key.
        """
        if connection.vendor == "postgresql":
            return self.filter(metadata__contains={key: value})
        return self.alias(metadata_value=KeyTransform(key, "metadata")).filter(metadata_value=value)


class TraceSession(models.Model):
    """All spans of one (project, session id); segmented into tasks once quiet."""

    class Outcome(models.TextChoices):
        NONE = "", "—"
        SUCCESS = "success"
        FAIL = "fail"

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="trace_sessions")
    session_id = models.CharField(max_length=255)
    run = models.ForeignKey("harnesses.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="trace_sessions")
    trial = models.ForeignKey("agent_tasks.Trial", null=True, blank=True, on_delete=models.SET_NULL, related_name="trace_sessions")
    first_span_at = models.DateTimeField()
    last_span_at = models.DateTimeField()
    span_count = models.PositiveIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True)
    outcome_at = models.DateTimeField(null=True, blank=True)
    # Set by ingest, cleared by segmentation: "has spans not yet segmented".
    needs_processing = models.BooleanField(default=True)
    last_received_at = models.DateTimeField(default=timezone.now)
    # When its first span arrived, by the server's clock (span times are the client's): an evaluator
    # scores the sessions that arrive after it was made. Set by the database, so ingest's INSERT need not name it.
    first_received_at = models.DateTimeField(db_default=Now())
    processed_at = models.DateTimeField(null=True, blank=True)
    # Who and what: traceloop.association.properties.user_id (or user.id,
    # enduser.id) and every other association property but the session id.
    user_id = models.CharField(max_length=255, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    objects = TraceSessionQuerySet.as_manager()

    class Meta:
        verbose_name = "session"
        ordering = ["-last_span_at"]
        constraints = [models.UniqueConstraint(fields=["project", "session_id"], name="one_session_per_id")]
        indexes = [
            models.Index(fields=["project", "-last_span_at"]),
            models.Index(fields=["needs_processing", "last_received_at"]),
            models.Index(fields=["project", "user_id", "-last_span_at"], name="session_user"),
            # metadata has a GIN index on PostgreSQL (jsonb_path_ops, for the
            # @> of `with_metadata`), made in migration 0004: SQLite has none.
        ]

    def __str__(self):
        return self.session_id

    @property
    def total_tokens(self):
        return self.input_tokens + self.output_tokens


class TaskGroup(models.Model):
    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="task_groups")
    key = models.CharField(max_length=100, help_text="workflow:<name> or msg:<signature hash>")
    name = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    # In every training export of the group (traces/training.py), so a model trained on one can be tested for it.
    canary = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "key"], name="one_group_per_key")]

    def __str__(self):
        return self.name


class Task(models.Model):
    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="tasks")
    session = models.ForeignKey(TraceSession, on_delete=models.CASCADE, related_name="tasks")
    group = models.ForeignKey(TaskGroup, null=True, on_delete=models.SET_NULL, related_name="tasks")
    # Stable identity across re-segmentation: the root span for a workflow
    # task, the first span of an idle-gap chunk.
    key = models.CharField(max_length=120)
    name = models.CharField(max_length=255)
    first_user_message = models.TextField(blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()
    span_count = models.PositiveIntegerField(default=0)
    excluded_from_training = models.BooleanField(default=False)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["started_at"]
        constraints = [models.UniqueConstraint(fields=["session", "key"], name="one_task_per_key")]

    def __str__(self):
        return self.name


ENTITY_KINDS = {"workflow", "task", "agent", "tool"}


class SpanQuerySet(ProjectScopedQuerySet):
    pass


class Span(models.Model):
    # Every index is paid for by ingest: project, and a trace id within a
    # project, are covered by the unique constraint, which leads with them;
    # task by a partial index (see Meta).
    # No foreign key in the database: PostgreSQL checks one per stored row,
    # a sixth of storing a 1,000-span batch. Ingest holds the project once
    # per batch instead, and deleting a project waits for it
    # (traces.batches._claim, lock_out).
    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="spans", db_index=False, db_constraint=False)
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    name = models.CharField(max_length=500)
    kind = models.PositiveSmallIntegerField(default=0)
    start_time = models.DateTimeField()
    end_time = models.DateTimeField()
    start_unix_nano = models.BigIntegerField()
    end_unix_nano = models.BigIntegerField()
    status_code = models.PositiveSmallIntegerField(default=0)
    status_message = models.TextField(blank=True)
    # Everything the span carried except the attributes its messages came
    # from (traces/messages.py), which are stored once, as `prompt`/`completion`.
    attributes = models.JSONField(default=dict)
    events = models.JSONField(default=list)
    resource = models.JSONField(default=dict)
    scope = models.CharField(max_length=255, blank=True)
    session_id = models.CharField(max_length=255, blank=True)
    user_id = models.CharField(max_length=255, blank=True)
    span_kind = models.CharField(max_length=40, blank=True, help_text="traceloop.span.kind: workflow, task, llm, tool…")
    workflow_name = models.CharField(max_length=255, blank=True)
    model = models.CharField(max_length=255, blank=True)
    prompt = models.JSONField(default=list)
    completion = models.JSONField(default=list)
    input_tokens = models.IntegerField(null=True)
    output_tokens = models.IntegerField(null=True)
    latency_ms = models.FloatField()
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="spans", db_index=False)
    received_at = models.DateTimeField(default=timezone.now)

    objects = SpanQuerySet.as_manager()

    class Meta:
        ordering = ["start_unix_nano"]
        # On PostgreSQL the table is partitioned by month of start_time
        # (traces/partitions.py), and a unique constraint there must include
        # the partition key. A span is re-sent whole (same ids, same start),
        # so this still stores it once.
        constraints = [models.UniqueConstraint(fields=["project", "trace_id", "span_id", "start_time"], name="span_once_per_project")]
        indexes = [
            models.Index(fields=["project", "session_id", "start_unix_nano"]),
            # Spans arrive without a task: only segmented ones need an entry.
            models.Index(fields=["task"], condition=models.Q(task__isnull=False), name="span_task_assigned"),
        ]

    def __str__(self):
        return f"{self.name} ({self.span_id})"

    @property
    def is_llm(self):
        # Workflow, task, agent and tool spans carry their function's input
        # and output as messages too: those are not LLM calls.
        if self.span_kind in ENTITY_KINDS:
            return False
        return self.span_kind == "llm" or bool(self.model) or bool(self.prompt)


class TraceBatch(models.Model):
    """One accepted ingest request, as it came, until a worker turns it into spans.

    Append-only: a worker deletes the row in the transaction that stores its
    spans (traces/batches.py), so a row exists exactly while its spans do not.
    """

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="+", db_index=False)
    # Who sent it: the worker applies what the key may write (a per-run key,
    # its own session) and records what it rejects against it.
    api_key = models.ForeignKey("core.ApiKey", null=True, on_delete=models.SET_NULL, related_name="+", db_index=False)
    # The session its key may write (workload_keys.own_session: a run's or a trial's
    # own; "" none; null any), found once by the request and kept for the
    # worker, which also reads from it whose secrets to mask. Not a foreign
    # key: a batch lives seconds, and a constraint would be checked on every
    # accepted request.
    own_session = models.CharField(max_length=40, null=True, blank=True)  # noqa: DJ001 (null any, "" none: two answers)
    body = models.BinaryField()
    content_type = models.CharField(max_length=100)
    content_encoding = models.CharField(max_length=20, blank=True)
    span_count = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]

    def __str__(self):
        return f"batch {self.pk} ({self.span_count} spans)"


class BatchProcessor(models.Model):
    """A running `manage.py process_trace_batches`, and how fast it has lately stored spans.

    Ingest's push-back (traces/backlog.py) works out from these how long the
    waiting batches take: their spans at the processors' rates, plus each
    batch's own cost. A processor refreshes its row every fraction of a
    second while it works and every second while idle; one that stopped
    answering (killed, or its machine gone) is left out once its row is stale.
    """

    name = models.CharField(max_length=255, unique=True, help_text="Host and process id.")
    spans_per_second = models.FloatField(
        null=True, help_text="While it had batches to store, over its recent ones, each batch's own cost taken off; empty before its first."
    )
    seconds_per_batch = models.FloatField(
        null=True,
        help_text="What any batch costs it, whatever its size (claiming it, its queries, the commit), from its batches of a few spans; empty before one.",
    )
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class IngestRejection(models.Model):
    """Spans an accepted batch turned out to hold that could not be stored.

    The request answers from a cheap check (traces.otlp.check); the worker's
    full parse can still refuse a span (a malformed attribute value) or a whole
    batch. The client has had its 200 by then, so the refusal is kept here.
    """

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="+")
    api_key = models.ForeignKey("core.ApiKey", null=True, on_delete=models.SET_NULL, related_name="+")
    received_at = models.DateTimeField()
    rejected = models.PositiveIntegerField()
    reasons = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.rejected} spans rejected"


# The scorer that asks the evaluator's judge deployment (evals.scoring.judge.LlmJudge).
JUDGE_SCORER = "llm_judge"


class Evaluator(models.Model):
    """A rule that scores live traffic: which sessions (or their tasks) it looks at, a sampling rate, and a scorer.

    It scores what arrives after it was created, on the eval queue once a
    session is quiet and segmented (traces/evaluators.py), never in the ingest
    path. Changing its rule makes a new version; scores keep the version they
    were made under.
    """

    class Target(models.TextChoices):
        SESSION = "session", "Sessions"
        TASK = "task", "Tasks"

    class Source(models.TextChoices):
        ANY = "any", "Any session"
        PRODUCTION = "production", "Production only (not from a harness run or a job's trial)"
        HARNESS = "harness", "From harness runs only"

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="evaluators")
    name = models.CharField(max_length=100)
    enabled = models.BooleanField(default=True)
    target = models.CharField(max_length=10, choices=Target.choices, default=Target.SESSION)
    # The filter: every field that is set must match.
    task_group = models.ForeignKey(TaskGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="evaluators")
    user_id = models.CharField("User", max_length=255, blank=True, help_text="The session's user id (as the agent reports it).")
    metadata = models.JSONField(default=dict, blank=True, help_text="Key-value pairs the session's metadata must hold.")
    outcome = models.CharField(max_length=10, blank=True, help_text="success, fail, none (no outcome reported), or empty for any.")
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.ANY)
    harness = models.ForeignKey("harnesses.Harness", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="Only this harness's runs.")
    sample_rate = models.FloatField(default=1.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    # Which sessions a sample takes is a function of the seed and the session: the same seed, the same subset.
    seed = models.BigIntegerField(default=0)
    # What scores a session: {"name": a scorer of traces.scorers.evaluator_scorer, "options": {...}}, checked by
    # traces.evaluators.check_scorer (GET /api/v1/scorers lists evals' scorers and their options; "trajectory" is a trace's own).
    scorer = models.JSONField(default=dict)
    judge = models.ForeignKey("evals.Deployment", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    daily_budget = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="A judge's spend per day (UTC) in dollars; scoring stops there.",
    )
    version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_evaluator_name_per_project")]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("traces:evaluator", args=[self.pk])

    @classmethod
    def harnesses_of(cls, project):
        """The harnesses an evaluator of `project` may filter on, through its own foreign key: traces imports no harness."""
        return cls._meta.get_field("harness").related_model.objects.filter(project=project)

    @property
    def needs_judge(self) -> bool:
        return self.scorer.get("name") == JUDGE_SCORER

    @property
    def scale(self) -> str:
        """A judge's scale (pass_fail or 1-10)."""
        return self.scorer.get("options", {}).get("scale", "pass_fail")

    @property
    def scorer_label(self) -> str:
        name = self.scorer.get("name", "")
        return {JUDGE_SCORER: "LLM judge", "trajectory": "Trajectory check"}.get(name, f"Code check: {name.replace('_', ' ')}")


class EvaluatorScore(models.Model):
    """One evaluator's score of one session (or one of its tasks), under the evaluator's version at the time."""

    class Status(models.TextChoices):
        SCORED = "scored"
        # The judge could not answer or be read: retried later (traces.evaluators.retry_errors), never a zero.
        ERROR = "error"
        # Left unscored because the evaluator's daily budget was spent.
        SKIPPED = "skipped"

    evaluator = models.ForeignKey(Evaluator, on_delete=models.CASCADE, related_name="scores")
    version = models.PositiveIntegerField()
    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="+", db_index=False)
    session = models.ForeignKey(TraceSession, on_delete=models.CASCADE, related_name="evaluator_scores")
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.CASCADE, related_name="evaluator_scores")
    task_group = models.ForeignKey(TaskGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=8, choices=Status.choices)
    value = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    # What the scorer saw and decided: the answer it read, the judge's reasoning, the checks' figures.
    detail = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    prompt_tokens = models.IntegerField(default=0)
    completion_tokens = models.IntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # The session's time, so scores chart by when the traffic happened rather than when it was scored.
    session_at = models.DateTimeField()
    scored_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-session_at", "-pk"]
        constraints = [
            # Once per evaluator version and session (or task): a re-delivered task or a re-segmented session scores nothing twice.
            models.UniqueConstraint(fields=["evaluator", "version", "session", "task"], name="one_score_per_version_and_target", nulls_distinct=False),
        ]
        indexes = [
            models.Index(fields=["evaluator", "session_at"]),
            models.Index(fields=["evaluator", "status", "scored_at"]),
            models.Index(fields=["session", "evaluator"]),
        ]

    def __str__(self):
        return f"{self.evaluator} on {self.session_id}: {self.value}"


class EvaluatorLabel(models.Model):
    """A person's grade of a judge evaluator's verdict: it counts on that judge's calibration card (evals/calibration.py)."""

    score = models.ForeignKey(EvaluatorScore, on_delete=models.CASCADE, related_name="labels")
    judge_key = models.CharField(max_length=200, db_index=True)
    judge_value = models.FloatField()
    value = models.FloatField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["score", "user"], name="one_evaluator_label_per_person")]

    def __str__(self):
        return f"label of {self.score_id}"
