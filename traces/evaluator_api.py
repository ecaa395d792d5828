"""The evaluators API: evaluators (CRUD), their scores, a backfill's estimate and start, and labels of a judge's verdicts."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.settings import api_settings

from belvedir.core import jsonvalues
from belvedir.core.ids import parse_id
from belvedir.core.permissions import request_project
from evals.models import Deployment

from .evaluator_rules import daily, label_score, save_evaluator, summary
from .evaluators import EvaluatorError, backfill_estimate, kind_and_config, start_backfill
from .models import Evaluator, EvaluatorScore, TaskGroup
from .training import BadFilter, parse_bound


class EvaluatorSerializer(serializers.ModelSerializer):
    # Deprecated, answered for one release beside `scorer`: the scorer as it was given before.
    kind = serializers.SerializerMethodField(help_text="Deprecated: read scorer.")
    config = serializers.SerializerMethodField(help_text="Deprecated: read scorer.")
    judge = serializers.CharField(source="judge.name", read_only=True, allow_null=True, default=None)
    task_group = serializers.CharField(source="task_group.name", read_only=True, allow_null=True, default=None)

    class Meta:
        model = Evaluator
        fields = [
            "id",
            "name",
            "enabled",
            "target",
            "task_group",
            "user_id",
            "metadata",
            "outcome",
            "source",
            "harness",
            "sample_rate",
            "seed",
            "scorer",
            "kind",
            "config",
            "judge",
            "daily_budget",
            "version",
            "created_at",
        ]

    def get_kind(self, evaluator) -> str:
        return kind_and_config(evaluator.scorer)[0]

    def get_config(self, evaluator) -> dict:
        return kind_and_config(evaluator.scorer)[1]


class EvaluatorWriteSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    enabled = serializers.BooleanField(default=True)
    target = serializers.ChoiceField(choices=Evaluator.Target.choices, default=Evaluator.Target.SESSION)
    task_group = serializers.IntegerField(required=False, allow_null=True, default=None, help_text="A task group's id: only its sessions or tasks.")
    user_id = serializers.CharField(required=False, allow_blank=True, default="")
    metadata = serializers.DictField(child=serializers.CharField(), required=False, default=dict)
    outcome = serializers.ChoiceField(choices=["", "success", "fail", "none"], required=False, default="")
    source = serializers.ChoiceField(choices=Evaluator.Source.choices, default=Evaluator.Source.ANY)
    harness = serializers.IntegerField(required=False, allow_null=True, default=None)
    sample_rate = serializers.FloatField(min_value=0, max_value=1, default=1.0)
    seed = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=jsonvalues.INT_MIN, max_value=jsonvalues.INT_MAX)
    scorer = serializers.JSONField(
        required=False,
        default=None,
        help_text='{"name": ..., "options": {...}}: a scorer of GET /api/v1/scorers (llm_judge with judge and daily_budget), or trajectory '
        "(max_steps, max_tool_errors, max_cost).",
    )
    kind = serializers.ChoiceField(choices=["code", "judge", "trajectory"], required=False, default=None, help_text="Deprecated: send scorer.")
    config = serializers.DictField(required=False, default=dict, help_text="Deprecated: send scorer.")
    judge = serializers.CharField(required=False, allow_null=True, allow_blank=True, default=None, help_text="A judge evaluator's deployment, name or id.")
    daily_budget = serializers.DecimalField(max_digits=12, decimal_places=4, required=False, allow_null=True, default=None, min_value=0)

    def resolved(self, project) -> dict:
        data = dict(self.validated_data)
        data["task_group"] = _one(TaskGroup.objects.filter(project=project), data["task_group"], "task group")
        data["harness"] = _one(Evaluator.harnesses_of(project), data["harness"], "harness")
        judge = data["judge"]
        if judge:
            deployments = Deployment.objects.filter(project=project)
            found = deployments.filter(pk=pk).first() if (pk := parse_id(judge)) else deployments.filter(name=judge).first()
            if found is None:
                raise EvaluatorError(f"No deployment {judge!r} in this project.")
            data["judge"] = found
        else:
            data["judge"] = None
        return data


DEPRECATED_KIND = 'Deprecated: kind and config are read until the next release; send scorer: {"name": ..., "options": {...}}.'


def _noted(body: dict, payload) -> dict:
    """The answer, with a deprecation note when the evaluator was given the old way (kind and config)."""
    return {**body, "deprecation": DEPRECATED_KIND} if payload.validated_data.get("scorer") is None else body


def _one(queryset, pk, what):
    if pk is None:
        return None
    found = queryset.filter(pk=pk).first()
    if found is None:
        raise EvaluatorError(f"No {what} #{pk} in this project.")
    return found


class EvaluatorScoreSerializer(serializers.ModelSerializer):
    evaluator = serializers.CharField(source="evaluator.name")
    session_id = serializers.CharField(source="session.session_id")
    task = serializers.CharField(source="task.name", allow_null=True, default=None)

    class Meta:
        model = EvaluatorScore
        fields = [
            "id",
            "evaluator",
            "version",
            "session_id",
            "task",
            "status",
            "value",
            "error",
            "detail",
            "attempts",
            "prompt_tokens",
            "completion_tokens",
            "cost",
            "session_at",
            "scored_at",
        ]


class BackfillSerializer(serializers.Serializer):
    since = serializers.CharField(help_text="A date or datetime: the window's start.")
    until = serializers.CharField(help_text="A date or datetime: the window's end.")
    confirm = serializers.BooleanField(default=False, help_text="False: only the estimate. True: start it.")


class EvaluatorLabelSerializer(serializers.Serializer):
    score = serializers.IntegerField()
    value = serializers.FloatField(required=False, allow_null=True, default=None)
    agree = serializers.BooleanField(required=False, allow_null=True, default=None)


class EvaluatorViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    serializer_class = EvaluatorSerializer
    queryset = Evaluator.objects.none()
    pagination_class = None

    def get_queryset(self):
        return Evaluator.objects.for_user(self.request.user, request_project(self.request)).select_related("judge", "task_group")

    def retrieve(self, request, pk=None):
        evaluator = self.get_object()
        return Response({**EvaluatorSerializer(evaluator).data, "summary": summary(evaluator), "daily": daily(evaluator)})

    @extend_schema(request=EvaluatorWriteSerializer, responses={201: EvaluatorSerializer})
    def create(self, request):
        """An evaluator on live traffic: it scores sessions that begin from now on (older ones: backfill)."""
        payload = EvaluatorWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        project = request_project(request)
        evaluator = save_evaluator(project, request.user, payload.resolved(project))
        return Response(_noted(EvaluatorSerializer(evaluator).data, payload), status=201)

    @extend_schema(request=EvaluatorWriteSerializer, responses={200: EvaluatorSerializer})
    def update(self, request, pk=None):
        """Change it; a changed rule makes a new version, and scores keep the version they were made under."""
        evaluator = self.get_object()
        payload = EvaluatorWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        project = request_project(request)
        return Response(_noted(EvaluatorSerializer(save_evaluator(project, request.user, payload.resolved(project), evaluator)).data, payload))

    @extend_schema(
        parameters=[OpenApiParameter("status", str, enum=["scored", "error", "skipped"]), OpenApiParameter("session", str)],
        responses=EvaluatorScoreSerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def scores(self, request, pk=None):
        """Its scores, newest traffic first; ?status=, ?session=SESSION_ID."""
        evaluator = self.get_object()
        scores = evaluator.scores.select_related("evaluator", "session", "task")
        if request.query_params.get("status"):
            scores = scores.filter(status=request.query_params["status"])
        if request.query_params.get("session"):
            scores = scores.filter(session__session_id=request.query_params["session"])
        # Paginated as every list of the API is (the evaluators' own list is short and is not).
        paginator = api_settings.DEFAULT_PAGINATION_CLASS()
        page = paginator.paginate_queryset(scores, request, view=self)
        return paginator.get_paginated_response(EvaluatorScoreSerializer(page, many=True).data)

    @extend_schema(request=BackfillSerializer, responses={200: dict})
    @action(detail=True, methods=["post"])
    def backfill(self, request, pk=None):
        """Score a window of past sessions: the estimate (sessions, scores, judge cost) first; `confirm` starts it."""
        evaluator = self.get_object()
        payload = BackfillSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            since, until = parse_bound(payload.validated_data["since"], end=False), parse_bound(payload.validated_data["until"], end=True)
        except BadFilter as exc:
            raise EvaluatorError(str(exc)) from None
        if since is None or until is None:
            raise EvaluatorError("A backfill needs its window: since and until.")
        if payload.validated_data["confirm"]:
            estimate = start_backfill(evaluator, since, until)
        else:
            estimate = backfill_estimate(evaluator, since, until)
        estimate.pop("session_ids")
        return Response({**estimate, "started": payload.validated_data["confirm"]})

    @extend_schema(request=EvaluatorLabelSerializer, responses={200: dict})
    @action(detail=True, methods=["post"])
    def label(self, request, pk=None):
        """Your grade of one of its judge's verdicts (or agree/disagree): it counts on the judge's calibration card."""
        evaluator = self.get_object()
        payload = EvaluatorLabelSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        score = get_object_or_404(evaluator.scores.all(), pk=payload.validated_data["score"])
        label = label_score(score, request.user, value=payload.validated_data["value"], agree=payload.validated_data["agree"])
        return Response({"score": score.pk, "judge": label.judge_key, "judge_value": label.judge_value, "value": label.value})
