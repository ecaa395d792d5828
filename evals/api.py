from collections import defaultdict
from urllib.parse import urlsplit

from django.db.models import ProtectedError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action, api_view
from rest_framework.response import Response

from belvedir.core import jsonvalues
from belvedir.core.api_errors import Conflict
from belvedir.core.ids import parse_id
from belvedir.core.permissions import request_project
from belvedir.core.serializers import django_validator

from . import benchmarks
from .actions import TARGET_RANGE, cancel_eval, create_eval, dataset_for, rescore_eval, resume_eval, retry_errors
from .categories import category_scores
from .comparison import NotPaired, compare_evals, decision_alpha
from .connection import try_connection
from .downloads import samples_file
from .metrics import metrics
from .models import CacheMode, Deployment, Eval, Sample, SampleAttempt
from .noise import noise
from .response_cache import clear_cache
from .scoring.calibration import NOT_CALIBRATED, calibration_status, label_verdict
from .scoring.scorers import DEPRECATED_SHAPES, SCORERS, old_shapes
from .validation import validate_deployment_url


class DeploymentSerializer(serializers.ModelSerializer):
    base_url = serializers.URLField(max_length=500, validators=[django_validator(validate_deployment_url)])
    api_key = serializers.CharField(write_only=True, required=False, allow_blank=True)
    api_key_masked = serializers.CharField(source="masked_key", read_only=True)

    class Meta:
        model = Deployment
        fields = [
            "id",
            "name",
            "base_url",
            "model",
            "api_key",
            "api_key_masked",
            "api_style",
            "max_in_flight",
            "input_price_per_million",
            "output_price_per_million",
            "cache_ttl_seconds",
            "served_fingerprint",
            "created_at",
        ]
        read_only_fields = ["id", "served_fingerprint", "created_at"]

    def update(self, instance, validated_data):
        # A deployment moved to another origin (scheme, host, port) loses its stored key unless one comes with the move:
        # a member could otherwise point a keyed deployment at a host of theirs, press Test, and receive the key.
        moved = "base_url" in validated_data and _origin(validated_data["base_url"]) != _origin(instance.base_url)
        if moved and "api_key" not in validated_data:
            validated_data["api_key"] = ""
        return super().update(instance, validated_data)

    def validate_name(self, value):
        project = self.context["project"]
        clash = Deployment.objects.filter(project=project, name=value)
        if self.instance:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError("A deployment with this name already exists in the project.")
        return value


def _origin(url: str) -> tuple:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


class EvalSerializer(serializers.ModelSerializer):
    deployment = serializers.CharField(source="deployment.name", read_only=True)
    dataset_id = serializers.IntegerField(read_only=True)
    rate_per_s = serializers.FloatField(read_only=True)
    eta_seconds = serializers.FloatField(read_only=True)
    score_ci = serializers.ListField(
        source="score_interval", child=serializers.FloatField(), read_only=True, allow_null=True, help_text="95% interval of the score."
    )
    same_rows_as = serializers.PrimaryKeyRelatedField(read_only=True)
    suite_run = serializers.PrimaryKeyRelatedField(read_only=True)
    rescored_from = serializers.PrimaryKeyRelatedField(read_only=True, help_text="Scored from this eval's stored outputs, without asking the deployment.")
    judge = serializers.CharField(source="judge.name", read_only=True, allow_null=True, default=None)
    decide_against = serializers.PrimaryKeyRelatedField(read_only=True, help_text="Stops once the sequential test decides against this eval (same rows).")
    early_stop = serializers.JSONField(
        read_only=True,
        help_text='Where and why it stopped early, e.g. {"at": 812, "of": 14042, "verdict": "better", "reason": "decision", "p": 0.003, "alpha": 0.05, "summary": ...}; {"resumed": ...} once resumed; {} otherwise.',
    )
    served_by = serializers.CharField(source="serving_described", read_only=True, help_text='`serving_stack` in words; "" when not known.')
    serving_stack = serializers.JSONField(
        read_only=True,
        help_text='What the deployment\'s server said of itself as it answered: {"server": [Server headers], "models": the /models entry\'s digest, '
        '"system_fingerprints": [...], "peak_in_flight": n}; {} when not known. A comparison across differing stacks says so (`serving`).',
    )
    concurrency = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField()),
        read_only=True,
        help_text="The latest pass's requests in flight about once a second: [seconds since it began, level allowed, in flight, answers per second].",
    )

    class Meta:
        model = Eval
        fields = [
            "id",
            "suite_run",
            "benchmark",
            "benchmark_version",
            "mode",
            "benchmark_options",
            "dataset_id",
            "dataset_version",
            "deployment",
            "scorers",
            "sample_limit",
            "seed",
            "same_rows_as",
            "rescored_from",
            "samples_per_problem",
            "epochs",
            "judge",
            "status",
            "status_message",
            "total",
            "done_count",
            "error_count",
            "score",
            "score_ci",
            "pass_at_k",
            "prompt_tokens",
            "completion_tokens",
            "judge_prompt_tokens",
            "judge_completion_tokens",
            "cost",
            "max_cost",
            "cache",
            "cache_hits",
            "cache_misses",
            "decide_against",
            "decision_alpha",
            "precision_target",
            "early_stop",
            "passes",
            "rate_per_s",
            "eta_seconds",
            "concurrency",
            "served_by",
            "serving_stack",
            "created_at",
            "started_at",
            "finished_at",
        ]


class CategoryScoreSerializer(serializers.Serializer):
    name = serializers.CharField()
    n = serializers.IntegerField()
    score = serializers.FloatField()
    score_ci = serializers.ListField(child=serializers.FloatField(), allow_null=True)


class MetricSerializer(CategoryScoreSerializer):
    headline = serializers.BooleanField(help_text="The metric the eval's score is.")
    unit = serializers.CharField(help_text="What n counts: rows, prompts or instructions.")
    score = serializers.FloatField(allow_null=True)


class EvalDetailSerializer(EvalSerializer):
    categories = serializers.SerializerMethodField(help_text="Per category axis (subject, group, level...): each category's score and 95% interval.")
    metrics = serializers.SerializerMethodField(
        help_text="The eval's figures besides its score, the headline first, each with its 95% interval: in log-likelihood mode the metrics lm-eval reports for the benchmark (acc, acc_norm); for IFBench prompt- and instruction-level accuracy, strict and loose."
    )

    noise = serializers.SerializerMethodField(
        help_text="With epochs: each epoch's score, the rows that flipped and the flip rate, and the noise floor (the 95% half-width of the delta between two runs of the same deployment) with its interval."
    )
    calibration = serializers.SerializerMethodField(help_text="A judged eval's judge: its key, how many human labels it has, and whether that is enough.")
    warnings = serializers.SerializerMethodField(help_text="What a reader of the score should know: a judge grading itself, a judge not calibrated.")

    class Meta(EvalSerializer.Meta):
        fields = [*EvalSerializer.Meta.fields, "categories", "metrics", "noise", "calibration", "warnings"]

    @extend_schema_field(serializers.DictField(child=CategoryScoreSerializer(many=True)))
    def get_categories(self, ev) -> dict:
        return category_scores(ev)

    @extend_schema_field(MetricSerializer(many=True))
    def get_metrics(self, ev) -> list:
        return metrics(ev)

    def get_noise(self, ev) -> dict | None:
        return noise(ev)

    def get_calibration(self, ev) -> dict | None:
        return calibration_status(ev) if ev.judge_id else None

    def get_warnings(self, ev) -> list[str]:
        return eval_warnings(ev)


class EvalCreateSerializer(serializers.Serializer):
    benchmark = serializers.CharField(required=False, allow_blank=True, default="")
    benchmark_options = serializers.DictField(
        required=False,
        allow_null=True,
        default=None,
        help_text="The benchmark's options, as the catalog lists them (e.g. mbpp: {\"challenge_tests\": true}); unset for the defaults, or the same_rows_as eval's.",
    )
    dataset_id = serializers.IntegerField(required=False, allow_null=True, default=None)
    dataset_version = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, default=None, help_text="The dataset's version to score; its latest by default."
    )
    deployment = serializers.CharField(help_text="Deployment name or id.")
    scorers = serializers.ListField(
        child=serializers.JSONField(),
        required=False,
        default=list,
        help_text='A dataset eval\'s scorers, {"name": ..., "options": {...}} each (GET /api/v1/scorers lists them); llm_judge asks the eval\'s judge.',
    )
    sample_limit = serializers.IntegerField(required=False, allow_null=True, min_value=1, default=None)
    seed = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=jsonvalues.INT_MIN, max_value=jsonvalues.INT_MAX)
    generation = serializers.DictField(required=False, default=dict)
    same_rows_as = serializers.IntegerField(required=False, allow_null=True, default=None, help_text="Score exactly the rows of this eval.")
    samples_per_problem = serializers.IntegerField(required=False, min_value=1, max_value=20, default=1, help_text="Completions per problem, for pass@k.")
    max_cost = serializers.DecimalField(max_digits=14, decimal_places=6, required=False, allow_null=True, default=None, min_value=0)
    judge = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, default=None, help_text="A judged benchmark's judge deployment (name or id), e.g. mt_bench."
    )
    epochs = serializers.IntegerField(
        required=False, min_value=1, max_value=10, default=1, help_text="Ask every row this many times: per-row pass rates, flips and the noise floor."
    )
    mode = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        default=None,
        help_text="generative (default; with same_rows_as, that eval's mode) or loglikelihood (multiple choice on a completions deployment).",
    )
    cache = serializers.ChoiceField(
        choices=CacheMode.choices,
        required=False,
        default=CacheMode.AUTO,
        help_text="The response cache: auto (a request answered before is not asked again, sampled ones without a seed excepted), always, or bypass (ask again, keep the fresh answers).",
    )
    decide_against = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="An eval of the same rows (its rows by default): stop once the sequential test decides against it, or finds no difference worth having.",
    )
    decision_alpha = serializers.FloatField(
        required=False, allow_null=True, default=None, min_value=0.0001, max_value=0.5, help_text="The decision's α (0.05 by default), valid at every look."
    )
    precision_target = serializers.FloatField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0.0001,
        max_value=0.5,
        help_text="Stop once the score's 95% interval is at most this far either side of it (e.g. 0.01).",
    )


class ResumeSerializer(serializers.Serializer):
    max_cost = serializers.DecimalField(max_digits=14, decimal_places=6, required=False, allow_null=True, default=None, min_value=0)


class SampleSerializer(serializers.ModelSerializer):
    class Meta:
        model = Sample
        fields = [
            "row_index",
            "input",
            "output",
            "extracted",
            "reference",
            "score",
            "scores",
            "error",
            "latency_ms",
            "prompt_tokens",
            "completion_tokens",
            "judge_prompt_tokens",
            "judge_completion_tokens",
            "completions",
            "cache_hits",
            "attempts",
        ]

    attempts = serializers.SerializerMethodField(help_text="The row's errored tries before this one (retried): when, what failed, their tokens.")

    def get_attempts(self, sample) -> list[dict]:
        return self.context.get("attempts", {}).get(sample.row_index, [])


class LabelSerializer(serializers.Serializer):
    row_index = serializers.IntegerField(min_value=0)
    turn = serializers.IntegerField(min_value=1, max_value=2, default=1, help_text="The verdict's turn (MT-Bench: 1 or 2).")
    value = serializers.FloatField(required=False, allow_null=True, default=None, help_text="Your own grade, on the judge's scale (1-10, or 0/1).")
    agree = serializers.BooleanField(required=False, allow_null=True, default=None, help_text="Or: whether you agree with the judge's grade.")


def deployment_by_name_or_id(project, value) -> Deployment | None:
    qs = Deployment.objects.filter(project=project)
    return qs.filter(pk=pk).first() if (pk := parse_id(value)) else qs.filter(name=value).first()


class DeploymentViewSet(
    mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    serializer_class = DeploymentSerializer
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = Deployment.objects.none()
    pagination_class = None

    def get_queryset(self):
        return Deployment.objects.for_user(self.request.user, request_project(self.request))

    @extend_schema(request=None, responses={200: inline_serializer("ClearedCache", {"id": serializers.IntegerField(), "removed": serializers.IntegerField()})})
    @action(detail=True, methods=["post"], url_path="clear-cache")
    def clear_cache(self, request, pk=None):
        """Remove the deployment's answers from the response cache: its next evals ask it again."""
        deployment = self.get_object()
        return Response({"id": deployment.pk, "removed": clear_cache(deployment)})

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "project": request_project(self.request)}

    def perform_create(self, serializer):
        serializer.save(project=request_project(self.request))

    def perform_destroy(self, instance):
        delete_protected(instance, "Its evaluations keep it: a deployment with evaluations cannot be deleted.")

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """Send one tiny request to the deployment and report what came back."""
        return Response(try_connection(self.get_object()))


class EvalViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = EvalSerializer
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = Eval.objects.none()

    def get_queryset(self):
        return Eval.objects.for_user(self.request.user, request_project(self.request)).select_related("deployment")

    def get_serializer_class(self):
        # Per-category scores only on one eval: a list of MMLU evals would group 14,042 rows each.
        return EvalDetailSerializer if self.action == "retrieve" else EvalSerializer

    @extend_schema(request=EvalCreateSerializer, responses={201: EvalSerializer})
    def create(self, request):
        """Start an eval: either `benchmark` or `dataset_id` (with `scorers`), against a deployment."""
        payload = EvalCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data, project = payload.validated_data, request_project(request)
        deployment = deployment_by_name_or_id(project, data["deployment"])
        if deployment is None:
            return Response({"deployment": [f"No deployment {data['deployment']!r} in this project."]}, status=400)
        dataset = dataset_for(project, data["dataset_id"])
        if data["dataset_id"] is not None and dataset is None:
            return Response({"dataset_id": ["No such dataset in this project."]}, status=400)
        source = self.get_queryset().filter(pk=data["same_rows_as"]).first() if data["same_rows_as"] is not None else None
        if data["same_rows_as"] is not None and source is None:
            return Response({"same_rows_as": ["No such eval in this project."]}, status=400)
        judge = deployment_by_name_or_id(project, data["judge"]) if data["judge"] else None
        if data["judge"] and judge is None:
            return Response({"judge": [f"No deployment {data['judge']!r} in this project."]}, status=400)
        against = self.get_queryset().filter(pk=data["decide_against"]).first() if data["decide_against"] is not None else None
        if data["decide_against"] is not None and against is None:
            return Response({"decide_against": ["No such eval in this project."]}, status=400)
        ev = create_eval(
            project,
            request.user,
            deployment=deployment,
            benchmark=data["benchmark"],
            dataset=dataset,
            dataset_version=data["dataset_version"],
            scorers=data["scorers"],
            sample_limit=data["sample_limit"],
            seed=data["seed"],
            generation=data["generation"],
            same_rows_as=source,
            samples_per_problem=data["samples_per_problem"],
            max_cost=data["max_cost"],
            mode=data["mode"],
            benchmark_options=data["benchmark_options"],
            judge=judge,
            epochs=data["epochs"],
            cache=data["cache"],
            decide_against=against,
            decision_alpha=data["decision_alpha"],
            precision_target=data["precision_target"],
        )
        body = EvalSerializer(ev).data
        if old_shapes(data["scorers"]):
            body = {**body, "deprecation": DEPRECATED_SHAPES}
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[OpenApiParameter("filter", str, enum=["wrong", "errors"]), OpenApiParameter("download", str, enum=["jsonl", "csv"])],
        responses=SampleSerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def samples(self, request, pk=None):
        """Per-sample results; ?filter=wrong|errors; ?download=jsonl|csv for a file."""
        ev = self.get_object()
        qs = filter_samples(ev.samples.all(), request.query_params.get("filter"))
        if "download" in request.query_params:
            return samples_file(qs, request.query_params["download"])
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(SampleSerializer(page, many=True, context={"attempts": attempts_by_row(ev, page)}).data)

    @extend_schema(request=None, responses={200: dict, 400: dict, 409: dict})
    @action(detail=True, methods=["post"], url_path="retry-errors")
    def retry_errors(self, request, pk=None):
        """Ask again only the rows that errored; each keeps its earlier attempts, whose tokens still count. 409 while it runs."""
        ev = self.get_object()
        retried = retry_errors(ev)
        ev.refresh_from_db()
        return Response({"retried": retried, "eval": EvalSerializer(ev).data})

    @extend_schema(request=None, responses={201: EvalSerializer})
    @action(detail=True, methods=["post"])
    def rescore(self, request, pk=None):
        """A new eval on the same rows, scored from this eval's stored outputs: the deployment is not asked (no token of it)."""
        rescored = rescore_eval(self.get_object(), request.user)
        return Response(EvalSerializer(rescored).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=LabelSerializer, responses={200: dict})
    @action(detail=True, methods=["post"])
    def label(self, request, pk=None):
        """Your grade of a judged verdict (or agree/disagree): what the judge's calibration card is made of."""
        ev = self.get_object()
        payload = LabelSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        sample = get_object_or_404(ev.samples.all(), row_index=data["row_index"])
        label = label_verdict(sample, request.user, turn=data["turn"], value=data["value"], agree=data["agree"])
        return Response({"row_index": sample.row_index, "turn": label.turn, "judge": label.judge_key, "judge_value": label.judge_value, "value": label.value})

    @extend_schema(request=None, responses={200: EvalSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Stop sending requests; finished samples are kept. 409 when it already ended."""
        ev = self.get_object()
        if not cancel_eval(ev):
            raise Conflict(f"The eval already ended ({ev.status}).")
        ev.refresh_from_db()
        return Response(EvalSerializer(ev).data)

    @extend_schema(request=ResumeSerializer, responses={200: EvalSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        """Continue a failed, cancelled, stalled or early-stopped eval on the same rows; 409 otherwise. `max_cost` sets a new budget."""
        ev = self.get_object()
        payload = ResumeSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        if not resume_eval(ev, max_cost=payload.validated_data["max_cost"]):
            raise Conflict(f"Only failed, cancelled, stalled or early-stopped evals resume (this one is {ev.status}).")
        ev.refresh_from_db()
        return Response(EvalSerializer(ev).data)

    @extend_schema(
        parameters=[OpenApiParameter("set_aside_flaky", bool), OpenApiParameter("sequential", bool), OpenApiParameter("alpha", float)],
        responses={200: dict, 400: dict, 409: dict},
    )
    @action(detail=True, methods=["get"], url_path=r"compare/(?P<other>\d+)")
    def compare(self, request, pk=None, other=None):
        """B (`other`) against A (this eval) on their shared rows: scores with CIs, paired delta with CI, McNemar p,
        flips, verdict, MDE, rows needed, the flipped samples; with epochs, the noise floor, and with
        ?set_aside_flaky=1 the rows that flipped within either side's epochs left out and listed. A `sequential`
        section (the always-valid test on the prefix of the run order both stored) when either stopped early,
        or with ?sequential=1 (at ?alpha=, the evals' own decision α by default). `serving` says whether the two
        were served by the same stack (Server header, /models entry, system_fingerprint) and warns when not.
        409 when the evals did not score the same rows."""
        a = self.get_object()
        b = get_object_or_404(self.get_queryset(), pk=other)
        alpha = None
        if flag(request, "sequential") or "alpha" in request.query_params:
            try:
                alpha = float(request.query_params.get("alpha") or decision_alpha(a, b))
            except ValueError:
                alpha = -1.0
            if not TARGET_RANGE[0] <= alpha <= TARGET_RANGE[1]:
                return Response({"alpha": [f"alpha must be a number between {TARGET_RANGE[0]:g} and {TARGET_RANGE[1]:g}."]}, status=400)
        try:
            return Response(compare_evals(a, b, set_aside_flaky=flag(request, "set_aside_flaky"), sequential_alpha=alpha))
        except NotPaired as exc:
            # The body also names the eval to rerun on (`same_rows_as`), which a plain error cannot carry.
            return Response({"detail": str(exc), "same_rows_as": a.pk}, status=exc.status_code)


def flag(request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in {"1", "true", "yes", "on"}


def attempts_by_row(ev: Eval, samples) -> dict[int, list[dict]]:
    """The page's rows' earlier errored attempts, in one query."""
    found = defaultdict(list)
    rows = [s.row_index for s in samples]
    for attempt in SampleAttempt.objects.filter(eval=ev, row_index__in=rows):
        found[attempt.row_index].append(
            {
                "at": attempt.at,
                "error": attempt.error,
                "prompt_tokens": attempt.prompt_tokens,
                "completion_tokens": attempt.completion_tokens,
                "judge_prompt_tokens": attempt.judge_prompt_tokens,
                "judge_completion_tokens": attempt.judge_completion_tokens,
            }
        )
    return dict(found)


def eval_warnings(ev: Eval) -> list[str]:
    warnings = []
    if ev.judged_by_itself:
        warnings.append(f"The judge is the deployment under test ({ev.deployment.name}): models are known to favour their own answers.")
    if ev.judge_id and not calibration_status(ev)["calibrated"]:
        warnings.append(NOT_CALIBRATED)
    return warnings


def filter_samples(qs, which):
    if which == "wrong":
        return qs.filter(error="", score__lt=1)
    if which == "errors":
        return qs.exclude(error="")
    return qs


def delete_protected(instance, message):
    try:
        instance.delete()
    except ProtectedError:
        raise Conflict(message) from None


@extend_schema(responses={200: dict})
@api_view(["GET"])
def benchmark_list(request):
    """The live benchmark catalog."""
    return Response([benchmarks.describe(module) for module in benchmarks.CATALOG.values()])


@extend_schema(responses={200: dict})
@api_view(["GET"])
def scorer_list(request):
    """The scorers a dataset eval or an evaluator may name, with their options ({"name": ..., "options": {...}} each)."""
    return Response([scorer.describe() for scorer in SCORERS.values()])
