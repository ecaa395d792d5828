"""The review API: queues (made, changed, filled, calibrating a judge), the next item for you, your label or skip,
progress, agreement, the labels themselves and their export to a dataset version."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from belvedir.core.permissions import request_project
from belvedir.core.reviewers import is_reviewer

from . import agreement, export, fill, handout, judged, progress, queues
from .errors import ReviewError
from .human_eval import human_eval
from .models import Item, Queue

# The actions a reviewer (Membership.Role.REVIEWER) may take: answering items.
REVIEWER_ACTIONS = {"next", "label", "skip"}


class QueueSerializer(serializers.ModelSerializer):
    rubric = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Queue
        fields = [
            "id",
            "name",
            "description",
            "overlap",
            "blind",
            "judge_key",
            "judge_score",
            "target_width",
            "stopped_at",
            "stop_reason",
            "dataset",
            "rubric",
            "progress",
            "created_at",
        ]

    def get_rubric(self, queue) -> dict:
        rubric = queue.rubric
        return {"version": rubric.number, "instructions": rubric.instructions, "scores": rubric.scores}

    def get_progress(self, queue) -> dict:
        return progress.of_queue(queue)


class QueueWriteSerializer(serializers.Serializer):
    """Types only; review.queues checks every rule and names the field it refuses (400)."""

    name = serializers.CharField(required=False, max_length=100)
    description = serializers.CharField(required=False, allow_blank=True, max_length=1000)
    overlap = serializers.IntegerField(required=False, help_text="How many people label each item independently (1 to 10).")
    blind = serializers.BooleanField(required=False, help_text="Hide the judge's verdict and others' labels until you label (default true).")
    scores = serializers.JSONField(required=False, help_text="The rubric: [{name, kind: numeric|categorical|boolean|text, min, max, labels, instructions}].")
    instructions = serializers.CharField(required=False, allow_blank=True, max_length=20_000)
    judge = serializers.CharField(
        required=False, max_length=200, help_text="Calibrate this judge (its key, from /api/v1/judges): the queue is filled with its verdicts."
    )
    target_width = serializers.FloatField(required=False, allow_null=True, help_text="A calibrating queue stops once κ's 95 % interval is this narrow.")


class ItemsInSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=Item.Kind.choices)
    ids = serializers.JSONField(required=False, help_text="By hand: session_ids (sessions, steps) or ids (samples, trials), up to 1,000.")
    step = serializers.IntegerField(required=False, help_text="A step item's number in its session's trajectory.")
    filters = serializers.JSONField(
        required=False,
        help_text="By filter: samples {eval, benchmark, deployment}, sessions {evaluator, verdict, outcome}, trials {job, status}; any {since, until, sample_rate}.",
    )


class ItemSerializer(serializers.ModelSerializer):
    judge_value = serializers.SerializerMethodField(help_text="The judge's verdict; null on a blind queue until you have labelled the item.")

    class Meta:
        model = Item
        fields = ["id", "kind", "object_id", "step", "judge_value", "labels_done", "done", "held_until"]

    def get_judge_value(self, item) -> float | None:
        return item.judge_value if self.context.get("unblinded") else None


class LabelInSerializer(serializers.Serializer):
    item = serializers.IntegerField()
    values = serializers.JSONField(required=False, default=dict)
    seconds = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=86_400)


class HumanEvalSerializer(serializers.Serializer):
    score = serializers.CharField(max_length=50, help_text="A numeric or boolean score of the rubric.")
    eval = serializers.IntegerField(required=False, help_text="The eval whose samples are graded, when the queue holds several's.")


class SkipSerializer(serializers.Serializer):
    item = serializers.IntegerField()


class QueueViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    serializer_class = QueueSerializer
    queryset = Queue.objects.none()

    @property
    def reviewers_may_write(self) -> bool:
        return self.action in REVIEWER_ACTIONS

    def get_queryset(self):
        found = Queue.objects.for_user(self.request.user, request_project(self.request)).prefetch_related("rubrics")
        # A list's progress from one query (a queue's own actions count afresh: they change it).
        return found.annotate(**progress.COUNTS) if self.action == "list" else found

    def _payload(self, serializer_class):
        payload = serializer_class(data=self.request.data)
        payload.is_valid(raise_exception=True)
        return payload.validated_data

    def _item(self, queue, pk) -> Item:
        return get_object_or_404(Item.objects.filter(queue=queue), pk=pk)

    @extend_schema(request=QueueWriteSerializer, responses={201: QueueSerializer})
    def create(self, request):
        """A queue with its rubric (`scores`), or one that calibrates a judge (`judge`, `target_width`): filled with its verdicts."""
        queue = queues.create_queue(request_project(request), request.user, dict(self._payload(QueueWriteSerializer)))
        return Response(QueueSerializer(queue).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=QueueWriteSerializer, responses={200: QueueSerializer})
    def partial_update(self, request, pk=None):
        """Change a queue; new `scores` or `instructions` make the rubric's next version."""
        payload = QueueWriteSerializer(data=request.data, partial=True)
        payload.is_valid(raise_exception=True)
        return Response(QueueSerializer(queues.update_queue(self.get_object(), request.user, dict(payload.validated_data))).data)

    @extend_schema(request=ItemsInSerializer, responses={200: dict})
    @action(detail=True, methods=["post"])
    def items(self, request, pk=None):
        """Add items by hand (`ids`) or by a filter (`filters`); answers how many were new and the queue's size."""
        queue = self.get_object()
        data = self._payload(ItemsInSerializer)
        if ("ids" in data) == ("filters" in data):
            raise ReviewError("ids", "Give either ids (by hand) or filters.")
        if "ids" in data:
            added = fill.add_items(queue, data["kind"], data["ids"], step=data.get("step"))
        else:
            added = fill.fill_by_filter(queue, data["kind"], data["filters"])
        return Response({"added": added, "items": queue.items.count()})

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"])
    def next(self, request, pk=None):
        """The item you label next, held for you for 15 minutes (the same one until you answer it); `item: null` when none is left for you."""
        queue = self.get_object()
        item = handout.next_item(queue, request.user)
        if item is None:
            return Response({"item": None, "stopped": queue.stop_reason or None})
        return Response({"item": ItemSerializer(item, context={"unblinded": not queue.blind}).data, "rubric": QueueSerializer().get_rubric(queue)})

    @extend_schema(request=LabelInSerializer, responses={201: dict})
    @action(detail=True, methods=["post"])
    def label(self, request, pk=None):
        """Your label of an item (a second one replaces the first). 409 when the item was taken while you held it; your values come back with it."""
        queue = self.get_object()
        data = self._payload(LabelInSerializer)
        item = self._item(queue, data["item"])
        try:
            label = handout.submit(queue, item, request.user, data["values"], seconds=data.get("seconds"))
        except ReviewError as exc:
            exc.response_fields = {**exc.response_fields, "values": data["values"]}
            raise
        item.refresh_from_db()
        return Response(
            {"item": ItemSerializer(item, context={"unblinded": True}).data, "values": label.values, "rubric_version": label.rubric.number},
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=SkipSerializer, responses={204: None})
    @action(detail=True, methods=["post"])
    def skip(self, request, pk=None):
        """Pass on an item: it is not handed to you again."""
        queue = self.get_object()
        handout.skip(queue, self._item(queue, self._payload(SkipSerializer)["item"]), request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"], url_path="progress")
    def progress_(self, request, pk=None):
        """Items, labels and what is left; per reviewer, labels, skips and the median seconds a label took."""
        queue = self.get_object()
        return Response({**progress.of_queue(queue), "reviewers": progress.of_reviewers(queue)})

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"], url_path="agreement")
    def agreement_(self, request, pk=None):
        """Between people: α per score and κ per pair, with intervals, and the items they disagree on; a calibrating
        queue adds the judge's κ against people (weighted by stratum) and where it stands against the target width."""
        queue = self.get_object()
        found = agreement.report(queue)
        if queue.blind and is_reviewer(request.user, queue.project):
            found.pop("disagreements")  # which items people disagree on is theirs to find out by labelling
        if queue.judge_key:
            found["judge"] = {"key": queue.judge_key, **judged.estimate(queue), "target_width": queue.target_width}
        return Response(found)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def labels(self, request, pk=None):
        """Every labelled item with each label (reviewer, rubric version, values) and the consensus. On a blind queue a reviewer sees only the items they labelled."""
        queue = self.get_object()
        only = request.user if queue.blind and is_reviewer(request.user, queue.project) else None
        found = export.labelled(queue, labelled_by=only)
        return Response({"queue": queue.pk, "rubric_version": queue.rubric.number, "items": found})

    @extend_schema(request=HumanEvalSerializer, responses={201: dict})
    @action(detail=True, methods=["post"], url_path="eval")
    def eval_(self, request, pk=None):
        """A human-graded eval: the labels of one score on an eval's samples, on the same rows, so that it compares paired."""
        queue = self.get_object()  # another project's queue is not found (404) before its body is read
        data = self._payload(HumanEvalSerializer)
        ev = human_eval(queue, request.user, data["score"], data.get("eval"))
        return Response({"eval": ev.pk, "score": ev.score, "rows": ev.total, "url": ev.get_absolute_url()}, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={201: dict})
    @action(detail=True, methods=["post"])
    def dataset(self, request, pk=None):
        """The labelled items as the next version of the queue's dataset (the first export makes it)."""
        queue = self.get_object()
        version = export.to_dataset(queue, request.user)
        return Response({"dataset": version.dataset_id, "version": version.number, "rows": version.row_count}, status=status.HTTP_201_CREATED)
