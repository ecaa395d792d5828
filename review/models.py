"""Human review: queues of items (a trace session or one of its steps, an eval sample, a job's trial) that the
project's reviewers label against a versioned rubric, one reviewer at a time per item, up to `overlap` labels each."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from belvedir.core.models import ProjectScopedQuerySet


class Queue(models.Model):
    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="review_queues")
    name = models.CharField(max_length=100)
    description = models.CharField(max_length=1000, blank=True)
    # How many people label each item, independently (2 or more: their agreement can be measured).
    overlap = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(10)])
    # Blind: a reviewer sees neither the judge's verdict nor others' labels of an item until they have labelled it.
    blind = models.BooleanField(default=True)
    # A queue that calibrates a judge (evals.scoring.judge key): its items carry the judge's verdict, the rubric's
    # `judge_score` is graded on the judge's scale, and each label counts on the judge's calibration card.
    judge_key = models.CharField(max_length=200, blank=True, db_index=True)
    judge_score = models.CharField(max_length=50, blank=True)
    # Active calibration (review/active.py): items drawn by stratum, until κ's interval is narrower than this.
    target_width = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.02), MaxValueValidator(2)])
    stopped_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=300, blank=True)
    # Where the labels were last exported to (a versioned dataset): the next export adds a version to it.
    dataset = models.ForeignKey("evals.Dataset", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("review:queue", args=[self.pk])

    @property
    def rubric(self) -> "RubricVersion":
        """The current version (from a prefetch of the versions when there is one: a list pays no query a queue)."""
        if "rubrics" in getattr(self, "_prefetched_objects_cache", {}):
            return max(self.rubrics.all(), key=lambda version: version.number)
        return self.rubrics.order_by("-number").first()


class RubricVersion(models.Model):
    """The scores a reviewer gives, as they were at one time: a change makes the next version; labels keep theirs."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="rubrics")
    number = models.PositiveIntegerField()
    instructions = models.TextField(blank=True)
    # [{"name", "kind": numeric|categorical|boolean|text, "min", "max", "labels": [...], "instructions"}], review/rubric.py
    scores = models.JSONField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["queue", "-number"]
        constraints = [models.UniqueConstraint(fields=["queue", "number"], name="one_rubric_version_number")]

    def __str__(self):
        return f"{self.queue} rubric v{self.number}"


class Item(models.Model):
    class Kind(models.TextChoices):
        SESSION = "session", "Trace session"
        STEP = "step", "Step of a session"
        SAMPLE = "sample", "Eval sample"
        TRIAL = "trial", "Job trial"

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="items")
    kind = models.CharField(max_length=7, choices=Kind.choices)
    # The session's, sample's or trial's primary key; a step also names its index in the session's trajectory.
    object_id = models.BigIntegerField()
    step = models.PositiveIntegerField(default=0)
    # The judge's verdict on it when it was queued (a calibrating queue), hidden from a blind reviewer until they label.
    judge_value = models.FloatField(null=True, blank=True)
    # Active calibration's stratum (0: the judge is sure; 1: near its threshold, or judges disagree) and a random
    # order within it; other queues draw in the order items were added.
    stratum = models.PositiveSmallIntegerField(default=0)
    order = models.FloatField(default=0.0)
    labels_done = models.PositiveSmallIntegerField(default=0)
    # labels_done has reached the queue's overlap: no one is handed it again.
    done = models.BooleanField(default=False)
    # Handed to one reviewer at a time, until held_until (review/handout.py).
    held_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    held_until = models.DateTimeField(null=True, blank=True)
    added_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["queue", "pk"]
        constraints = [models.UniqueConstraint(fields=["queue", "kind", "object_id", "step"], name="one_item_per_object_in_queue")]
        # The next item's search: open items of a queue (and stratum) in draw order.
        indexes = [
            models.Index(fields=["queue", "stratum", "order", "id"], name="review_item_next", condition=Q(done=False)),
            # The item a reviewer already holds, asked first on every next.
            models.Index(fields=["held_by", "queue"], name="review_item_held", condition=Q(held_by__isnull=False)),
        ]

    def __str__(self):
        return f"{self.kind} {self.object_id}" + (f" step {self.step}" if self.kind == self.Kind.STEP else "")


class Label(models.Model):
    """One reviewer's answer to one item: their scores under the rubric version they saw, or a skip."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="labels")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    rubric = models.ForeignKey(RubricVersion, on_delete=models.PROTECT, related_name="labels")
    values = models.JSONField(default=dict, blank=True)
    skipped = models.BooleanField(default=False)
    seconds = models.FloatField(null=True, blank=True, help_text="From being handed the item to labelling it.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["item", "created_at"]
        constraints = [models.UniqueConstraint(fields=["item", "reviewer"], name="one_label_per_item_and_reviewer")]
        indexes = [models.Index(fields=["reviewer", "item"], name="review_label_by_reviewer")]

    def __str__(self):
        return f"{self.reviewer} on {self.item}"
