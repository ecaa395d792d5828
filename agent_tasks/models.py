from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from belvedir.core.models import ProjectScopedQuerySet

from .archive import unpack
from .harbor_format import DEFAULT_BUILD_TIMEOUT_SEC


class TaskSet(models.Model):
    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="task_sets")
    name = models.CharField(max_length=100)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_task_set_name_per_project")]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("agent_tasks:detail", args=[self.pk])


class TaskSetVersionQuerySet(ProjectScopedQuerySet):
    project_path = "task_set__project"


class TaskSetVersion(models.Model):
    """One immutable content of a task set, named by the SHA-256 of its files: a job pins the version it ran."""

    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    digest = models.CharField(max_length=64, help_text="SHA-256 over every task's files: sorted paths and their bytes.")
    file_count = models.PositiveIntegerField()
    total_bytes = models.PositiveBigIntegerField()
    changes = models.JSONField(
        default=dict, blank=True, help_text="What changed from the version before, per task, and what it means for results (agent_tasks/versions.py)."
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = TaskSetVersionQuerySet.as_manager()

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(fields=["task_set", "number"], name="one_number_per_task_set_version"),
            # The same content imported again is the version it already is, even when two imports race.
            models.UniqueConstraint(fields=["task_set", "digest"], name="one_version_per_task_set_content"),
        ]

    def __str__(self):
        return f"{self.task_set} v{self.number}"


class AgentTaskQuerySet(ProjectScopedQuerySet):
    project_path = "version__task_set__project"

    def without_files(self):
        return self.defer("archive")


class AgentTask(models.Model):
    """One task of a version: what the pages and the API show, parsed once at import, and its files.

    The files are a gzipped tar in the row, not a file under MEDIA_ROOT: the import is one transaction, and a
    refused or rolled-back import then leaves nothing behind (a file written before a rollback would be an
    orphan); archives are capped at BELVEDIR_TASK_ARCHIVE_MAX_MB, and lists defer the column.
    """

    version = models.ForeignKey(TaskSetVersion, on_delete=models.CASCADE, related_name="tasks")
    name = models.CharField(max_length=100, help_text="The task's directory name.")
    instruction = models.TextField()
    config = models.JSONField(help_text="task.toml as parsed, unknown keys included.")
    unknown_keys = models.JSONField(default=list, help_text="Dotted keys of task.toml that Harbor's schema does not name.")
    agent_timeout_sec = models.FloatField()
    verifier_timeout_sec = models.FloatField()
    has_solution = models.BooleanField()
    environment = models.JSONField(
        default=dict, help_text="How its Dockerfile is built here, read at import: the image named and what stands in for it, build steps, or why it cannot be."
    )
    digest = models.CharField(max_length=64)
    parts = models.JSONField(default=dict, blank=True, help_text="A digest of each of its parts (agent_tasks/versions.py): what changed between versions.")
    file_count = models.PositiveIntegerField()
    size = models.PositiveBigIntegerField(help_text="Bytes of its files, uncompressed.")
    archive = models.BinaryField(help_text="Its files as a .tar.gz.")

    objects = AgentTaskQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["version", "name"], name="one_task_name_per_version")]

    def __str__(self):
        return self.name

    @property
    def build_timeout_sec(self) -> float:
        """How long its environment's build may take (task.toml's environment.build_timeout_sec, Harbor's default)."""
        return float(self.config.get("environment", {}).get("build_timeout_sec", DEFAULT_BUILD_TIMEOUT_SEC))

    def files(self, *folders: str) -> dict[str, bytes]:
        """Its files, or only those under `folders`: a trial takes `environment/` first, and `tests/` and
        `solution/` only once the agent's phase is over, so the agent never sees them."""
        return unpack(bytes(self.archive), tuple(f.rstrip("/") + "/" for f in folders))


class Job(models.Model):
    """Agents × deployments × tasks × attempts on one pinned task set version, within a budget.

    Its trials are made up front (`queued`) and sent to the queue as the sandbox hosts have room
    (agent_tasks/jobs.py). `charged_cents` is the running total of its trials' ledger charges less their
    refunds, moved in the same transaction as each ledger entry, so the budget check reads one locked row.
    """

    class Status(models.TextChoices):
        RUNNING = "running"
        FINISHED = "finished"
        # Its trials errored past the share a job may lose (belvedir/error_share.py), or none ran: its rewards are
        # not the task set's.
        FAILED = "failed"
        CANCELLED = "cancelled"

    ENDED = (Status.FINISHED, Status.FAILED, Status.CANCELLED)

    class Purpose(models.TextChoices):
        JOB = "job"
        # The red team, oracle and nop on every task of its version (agent_tasks/audits.py).
        AUDIT = "audit"

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="jobs")
    purpose = models.CharField(max_length=10, choices=Purpose.choices, default=Purpose.JOB)
    name = models.CharField(max_length=100, blank=True)
    version = models.ForeignKey(TaskSetVersion, on_delete=models.PROTECT, related_name="jobs")
    agents = models.JSONField(help_text="Agent names, each run on every task.")
    deployments = models.ManyToManyField("evals.Deployment", blank=True, related_name="jobs", help_text="Each paired with every agent that calls a model.")
    tasks = models.JSONField(default=list, blank=True, help_text="Task names to run; empty for all of the version's.")
    attempts = models.PositiveIntegerField(default=1)
    budget_cents = models.PositiveIntegerField(help_text="What its trials may be charged in all; a trial that would pass it is skipped.")
    charged_cents = models.IntegerField(default=0)
    runtime = models.CharField(max_length=20, default="auto", help_text="auto (each host's default), runc or runsc.")
    deny_hosts = models.JSONField(default=list, blank=True, help_text="Hosts no agent may reach (a benchmark's own website): a trial that did is flagged.")
    agent_commands = models.JSONField(default=dict, blank=True, help_text="How each agent installed by its package (pip:NAME) is run once installed.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    status_message = models.TextField(blank=True, help_text="Why it failed: how many trials errored, and the first error.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status"], name="job_status")]

    def __str__(self):
        return self.name or f"Job #{self.pk}"

    def get_absolute_url(self):
        return reverse("agent_tasks:job", args=[self.pk])


class TrialQuerySet(ProjectScopedQuerySet):
    project_path = "task__version__task_set__project"


def trajectory_steps(trajectory) -> list[dict]:
    """An agent's trajectory's steps as pages, flags and token counts read them: each {"text", "usage", "commands":
    [{"command", "output"}]}. It is the agent's own file, so any part of it may be of any type: what is not of the
    expected shape reads as empty, never as an error of the platform's."""
    steps = trajectory.get("steps") if isinstance(trajectory, dict) else None
    read = []
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            continue
        commands = step.get("commands")
        read.append(
            {
                "text": _text(step.get("text")),
                "usage": step["usage"] if isinstance(step.get("usage"), dict) else {},
                "commands": [
                    {"command": _text(c.get("command")), "output": _text(c.get("output"))}
                    for c in (commands if isinstance(commands, list) else [])
                    if isinstance(c, dict)
                ],
            }
        )
    return read


def _text(value) -> str:
    return value if isinstance(value, str) else ""


# A trial's trace session is this and its id; a harness run's is its id alone (traces/workload_keys.py).
TRACE_SESSION_PREFIX = "trial-"


class Trial(models.Model):
    """One agent's attempt at one task in a fresh sandbox: the agent's phase, then the verifier's, and its reward.

    `errored` is never a reward of 0: the platform failed (`platform_fault`: refunded, retry it) or the
    verifier's output could not be read as a reward; `error` says which. A job's trial waits `queued` until a
    host has room (`sent_at` once it is on the queue), and is `skipped` when the job's budget, the balance or a
    cancel stops it before it starts. A trial is `running` from before its sandbox starts, so the reaper can
    tell its container from an orphan (the owner kind `trial`, agent_tasks/apps.py).
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        ERRORED = "errored"
        SKIPPED = "skipped"

    ENDED = (Status.SUCCEEDED, Status.ERRORED, Status.SKIPPED)

    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="trials")
    task = models.ForeignKey(AgentTask, on_delete=models.CASCADE, related_name="trials")
    agent = models.CharField(max_length=50)
    deployment = models.ForeignKey("evals.Deployment", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    attempt = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    reward = models.FloatField(null=True, blank=True)
    agent_exit = models.IntegerField(null=True, blank=True)
    verifier_exit = models.IntegerField(null=True, blank=True)
    agent_seconds = models.FloatField(null=True, blank=True)
    verifier_seconds = models.FloatField(null=True, blank=True)
    agent_output = models.TextField(blank=True, help_text="The last 4 KB of what the agent's phase printed.")
    verifier_output = models.TextField(blank=True, help_text="The last 4 KB of what the verifier printed.")
    error = models.TextField(blank=True)
    platform_fault = models.BooleanField(default=False, help_text="Errored by the platform, not the task or agent: its charge is refunded.")
    flagged = models.BooleanField(default=False, help_text="The agent did something a verifier must not trust (wrote its reward).")
    flag_reasons = models.JSONField(default=list, blank=True)
    runtime = models.CharField(max_length=20, blank=True)
    verifier_mode = models.CharField(max_length=10, blank=True, help_text="in_place (the agent's sandbox, hardened) or sealed (a fresh one with its outputs).")
    graded_digest = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the declared outputs the verifier graded (agent_tasks/outputs.py).")
    limits = models.JSONField(default=dict, blank=True, help_text="The cpus and memory_mb applied from the task, and what a host's maximum held back.")
    price_cents = models.PositiveIntegerField(default=0)
    trajectory = models.JSONField(default=dict, blank=True, help_text="The agent's own account of its phase: its steps, each model turn and command.")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    # A model agent's own trace key (agent_tasks/trace_keys.py): issued when its phase starts, revoked when the
    # trial ends. The secrets its agent was given (the key's raw value among them) are kept so the trace workers,
    # which see only the key's hash, mask them in what it sends.
    api_key = models.ForeignKey("core.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    secret_values = models.JSONField(default=list, blank=True, editable=False)
    # Past it a `running` trial's worker is gone: the task's two time limits and the sandbox's start, with room.
    deadline_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TrialQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "deadline_at"], name="trial_status_deadline"),
            models.Index(fields=["job", "status"], name="trial_job_status"),
        ]

    def __str__(self):
        return f"{self.agent} on {self.task_id} #{self.attempt}"

    def get_absolute_url(self):
        return reverse("agent_tasks:trial", args=[self.pk])

    @property
    def kept_outputs(self) -> "TrialOutputs | None":
        """What its agent produced, kept (its declared outputs), without the archive itself; None when nothing was."""
        return TrialOutputs.objects.defer("archive").filter(trial=self).first()

    @property
    def steps(self) -> list[dict]:
        """Its trajectory's steps, each of the shape the page reads (trajectory_steps)."""
        return trajectory_steps(self.trajectory)

    @property
    def own_session(self) -> str:
        """The one session its own trace key writes (agent_tasks/trace_keys.py)."""
        return f"{TRACE_SESSION_PREFIX}{self.pk}"

    # What the egress record says a reviewer must see (egress_record.denied_by_trial), set where it was read.
    egress_flags: list = ()

    @property
    def is_flagged(self) -> bool:
        """Flagged by what happened in its sandbox, or by where its egress record says it went."""
        return self.flagged or bool(self.egress_flags)

    @property
    def all_flag_reasons(self) -> list[str]:
        return [*self.flag_reasons, *(f"The agent {said} through egress." for said in self.egress_flags)]

    @property
    def model_cost(self):
        """Dollars the agent's model calls cost at the deployment's prices (its own token counts); None unpriced."""
        return self.deployment.cost(self.input_tokens, self.output_tokens) if self.deployment_id else None

    @property
    def contestant(self) -> str:
        """The column it belongs to in a job's matrix: the agent, with the model it called."""
        return f"{self.agent} · {self.deployment.name}" if self.deployment_id else self.agent


class TrialOutputs(models.Model):
    """What the agent of a trial produced: the outputs its task declares, as a gzipped tar (bounded by
    BELVEDIR_TRIAL_OUTPUTS_MAX_MB), with the digest its verifier graded. Kept apart from the trial's row so lists of
    trials never read it; a regrade grades it again without the agent."""

    trial = models.OneToOneField(Trial, on_delete=models.CASCADE, primary_key=True, related_name="outputs")
    archive = models.BinaryField()
    digest = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField(help_text="Bytes of its files.")
    file_count = models.PositiveIntegerField()
    dropped = models.JSONField(default=list, blank=True, help_text="What was not kept, and why: a link outside the outputs, a named pipe...")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "trial outputs"

    def __str__(self):
        return f"Outputs of trial #{self.trial_id} ({self.digest[:12]})"


class RegradeQuerySet(ProjectScopedQuerySet):
    project_path = "job__project"


class Regrade(models.Model):
    """A job's trials graded again by another version's tests, from the outputs they kept, without their agents
    (agent_tasks/regrades.py). Each trial graded is a Grade, a paid workload of its own."""

    class Status(models.TextChoices):
        RUNNING = "running"
        FINISHED = "finished"
        CANCELLED = "cancelled"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="regrades")
    version = models.ForeignKey(TaskSetVersion, on_delete=models.PROTECT, related_name="regrades", help_text="The version whose tests grade.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    charged_cents = models.IntegerField(default=0, help_text="Its grades' charges less their refunds, moved with each ledger entry.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RegradeQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"Regrade #{self.pk} of {self.job} by {self.version}"

    def get_absolute_url(self):
        return reverse("agent_tasks:regrade", args=[self.pk])


class GradeQuerySet(ProjectScopedQuerySet):
    project_path = "regrade__job__project"


class Grade(models.Model):
    """One trial graded again: its kept outputs in a fresh sandbox of the new version's task, by that version's tests.
    `skipped` says why it could not be (its task changed more than its tests, it kept no outputs)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        ERRORED = "errored"
        SKIPPED = "skipped"

    ENDED = (Status.SUCCEEDED, Status.ERRORED, Status.SKIPPED)

    regrade = models.ForeignKey(Regrade, on_delete=models.CASCADE, related_name="grades")
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="grades")
    task = models.ForeignKey(AgentTask, null=True, blank=True, on_delete=models.CASCADE, related_name="+", help_text="The new version's task.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    reward = models.FloatField(null=True, blank=True)
    verifier_exit = models.IntegerField(null=True, blank=True)
    verifier_seconds = models.FloatField(null=True, blank=True)
    verifier_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    platform_fault = models.BooleanField(default=False)
    graded_digest = models.CharField(max_length=64, blank=True)
    runtime = models.CharField(max_length=20, blank=True)
    price_cents = models.PositiveIntegerField(default=0)
    deadline_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = GradeQuerySet.as_manager()

    class Meta:
        ordering = ["pk"]
        indexes = [
            models.Index(fields=["status", "deadline_at"], name="grade_status_deadline"),
            models.Index(fields=["regrade", "status"], name="grade_regrade_status"),
        ]

    def __str__(self):
        return f"Grade #{self.pk} of trial #{self.trial_id}"
