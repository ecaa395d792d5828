from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from belvedir.core.api_errors import Conflict
from belvedir.core.ids import parse_id
from belvedir.core.masks import MaskWithoutSecret
from belvedir.core.permissions import request_project
from belvedir.core.serializers import django_validator
from belvedir.sandbox.models import EgressDestination, EgressGrant

from .actions import MAX_REPEATS, cancel_run, save_harness, start_run, start_runs
from .models import MAX_TIME_LIMIT_SECONDS, Harness, Preset, Run
from .scores import compare_labels, scores_by_label, summary
from .validation import validate_command, validate_egress_domains, validate_env_name, validate_ref, validate_repo_url


class EnvVarSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, validators=[django_validator(validate_env_name)])
    value = serializers.CharField(allow_blank=True, trim_whitespace=False)
    secret = serializers.BooleanField(default=False)

    def to_representation(self, env_var):
        return {"name": env_var.name, "value": env_var.display_value, "secret": env_var.secret}


class HarnessSerializer(serializers.ModelSerializer):
    env_vars = EnvVarSerializer(many=True, required=False)
    preset = serializers.SlugRelatedField(slug_field="slug", queryset=Preset.objects.all(), required=False, allow_null=True)
    repo_url = serializers.CharField(max_length=500, validators=[django_validator(validate_repo_url)])
    ref = serializers.CharField(max_length=200, required=False, allow_blank=True, validators=[django_validator(validate_ref)])
    install_command = serializers.CharField(validators=[django_validator(validate_command)])
    run_command = serializers.CharField(validators=[django_validator(validate_command)])
    time_limit_seconds = serializers.IntegerField(min_value=10, max_value=MAX_TIME_LIMIT_SECONDS, required=False)
    egress_domains = serializers.CharField(required=False, allow_blank=True, validators=[django_validator(validate_egress_domains)])
    price_cents = serializers.IntegerField(read_only=True)

    class Meta:
        model = Harness
        fields = [
            "id",
            "name",
            "repo_url",
            "ref",
            "install_command",
            "run_command",
            "compute_type",
            "gpu_type",
            "tasks",
            "time_limit_seconds",
            "egress_domains",
            "local_model",
            "preset",
            "env_vars",
            "price_cents",
            "created_at",
        ]
        read_only_fields = ["id", "created_at"]

    def validate_env_vars(self, env_vars):
        if self.partial:
            # The list replaces every variable, so each is whole in a PATCH too (DRF's partial reaches nested
            # fields: a variable without a name was a KeyError, a 500).
            whole = EnvVarSerializer(data=self.initial_data["env_vars"], many=True)
            if not whole.is_valid():
                raise serializers.ValidationError(whole.errors)
            env_vars = whole.validated_data
        names = [v["name"] for v in env_vars]
        if len(names) != len(set(names)):
            raise serializers.ValidationError("Each variable name may appear once.")
        return env_vars

    def validate(self, attrs):
        preset = attrs.get("preset", getattr(self.instance, "preset", None))
        tasks = attrs.get("tasks", getattr(self.instance, "tasks", ""))
        if preset and preset.needs_tasks and not (tasks or "").strip():
            raise serializers.ValidationError({"tasks": f"{preset.name} brings no task suite: tasks are required."})
        return attrs

    def create(self, validated):
        env_vars = validated.pop("env_vars", [])
        return self._saved(Harness(**validated), env_vars)

    def update(self, harness, validated):
        env_vars = validated.pop("env_vars", None)
        for name, value in validated.items():
            setattr(harness, name, value)
        return self._saved(harness, env_vars)

    def _saved(self, harness, env_vars):
        try:
            return save_harness(harness, env_vars)
        except MaskWithoutSecret as exc:
            raise serializers.ValidationError({"env_vars": [str(exc)]}) from None


class StartRunsSerializer(serializers.Serializer):
    repeats = serializers.IntegerField(required=False, min_value=1, max_value=MAX_REPEATS, help_text="Start this many runs at once (answered with a list).")


def start_run_response(harness, user, env_for=None, repeats=None) -> Response:
    """201 with the run (a list with `repeats`); 402 when the balance is short; 409 when no such GPU is free.

    Both errors carry their status (the API's exception handler answers).
    """
    if repeats is not None:
        runs = start_runs(harness, user, repeats)
        return Response(RunSerializer(runs, many=True).data, status=status.HTTP_201_CREATED)
    run = start_run(harness, user, env_for=env_for)
    return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


class SecretFoundSerializer(serializers.Serializer):
    name = serializers.CharField(
        read_only=True, help_text="The secret's env var name (a harness's secret env, a project secret, or the run's own: its key, its canary)."
    )
    places = serializers.ListField(child=serializers.ChoiceField(choices=["log", "results.json", "spans"]), read_only=True)


class RunSerializer(serializers.ModelSerializer):
    harness = serializers.PrimaryKeyRelatedField(read_only=True)
    harness_name = serializers.CharField(source="harness.name", read_only=True)
    model = serializers.CharField(source="model_label", read_only=True)
    duration_seconds = serializers.SerializerMethodField()
    session_id = serializers.SerializerMethodField()
    secret_reached_output = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text='Where any of the run\'s secrets (its canary among them) showed up, redacted: "log", "results.json", "spans". Empty when nowhere.',
    )
    secrets_reached_output = serializers.ListField(
        child=SecretFoundSerializer(),
        read_only=True,
        help_text="Which of the run's secrets showed up in its output (by env var name, never the value) and where; redacted before storing. Empty when none.",
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "harness",
            "harness_name",
            "status",
            "status_message",
            "score",
            "model",
            "results",
            "results_error",
            "exit_code",
            "commit_sha",
            "compute_type",
            "price_cents",
            "created_at",
            "launched_at",
            "install_started_at",
            "run_started_at",
            "finished_at",
            "duration_seconds",
            "session_id",
            "secret_reached_output",
            "secrets_reached_output",
        ]

    def get_duration_seconds(self, run) -> float | None:
        return run.duration.total_seconds() if run.duration else None

    def get_session_id(self, run) -> str:
        return str(run.pk)


class EgressDestinationSerializer(serializers.ModelSerializer):
    class Meta:
        model = EgressDestination
        fields = ["host", "port", "allowed", "reason", "requests", "bytes_up", "bytes_down", "last_at"]


class EgressSerializer(serializers.ModelSerializer):
    destinations = EgressDestinationSerializer(many=True)

    class Meta:
        model = EgressGrant
        fields = ["domains", "max_bytes", "bytes_up", "bytes_down", "cap_reached_at", "destinations"]


class RunDetailSerializer(RunSerializer):
    egress = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "egress"]

    @extend_schema_field(EgressSerializer(allow_null=True))
    def get_egress(self, run):
        """Hosts the run contacted through the egress proxy, and what was denied; null without egress."""
        grant = run.egress_grant()
        return EgressSerializer(grant).data if grant else None


class PresetSerializer(serializers.ModelSerializer):
    repo_url = serializers.CharField(source="resolved_repo_url")

    class Meta:
        model = Preset
        fields = [
            "slug",
            "name",
            "description",
            "repo_url",
            "ref",
            "install_command",
            "run_command",
            "compute_type",
            "gpu_type",
            "env_var_names",
            "needs_tasks",
            "local_model",
        ]


class HarnessViewSet(viewsets.ModelViewSet):
    serializer_class = HarnessSerializer
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = Harness.objects.none()
    http_method_names = ["get", "post", "patch", "delete"]

    def get_queryset(self):
        return Harness.objects.for_user(self.request.user, request_project(self.request)).select_related("preset").prefetch_related("env_vars")

    def perform_create(self, serializer):
        serializer.save(project=request_project(self.request), created_by=self.request.user)

    def destroy(self, request, *args, **kwargs):
        harness = self.get_object()
        if harness.runs.active().exists():
            raise Conflict("Cancel the harness's active runs before deleting it.")
        return super().destroy(request, *args, **kwargs)

    @extend_schema(request=StartRunsSerializer, responses={201: RunSerializer})
    @action(detail=True, methods=["post"])
    def runs(self, request, pk=None):
        """Start a run: charged now; 402 when the balance does not cover it.

        With `repeats` N, start N runs at once, each charged as a run (all or none), and answer with the list.
        """
        harness = self.get_object()
        payload = StartRunsSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        return start_run_response(harness, request.user, repeats=payload.validated_data.get("repeats"))

    @extend_schema(parameters=[OpenApiParameter("a", str), OpenApiParameter("b", str)], responses={200: dict})
    @action(detail=True, methods=["get"])
    def scores(self, request, pk=None):
        """Succeeded runs' scores per model label (mean, 95% CI, n); with ?a=LABEL&b=LABEL, Welch's t-test of b against a."""
        groups = scores_by_label(self.get_object())
        body = {"labels": summary(groups)}
        if request.query_params.get("a") and request.query_params.get("b"):
            body["comparison"] = compare_labels(groups, request.query_params["a"], request.query_params["b"])
        return Response(body)


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = RunSerializer
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = Run.objects.none()

    def get_serializer_class(self):
        return RunDetailSerializer if self.action == "retrieve" else RunSerializer

    def get_queryset(self):
        qs = Run.objects.for_user(self.request.user, request_project(self.request)).select_related("harness")
        if harness := self.request.query_params.get("harness"):
            qs = qs.filter(harness_id=pk) if (pk := parse_id(harness)) else qs.none()
        if run_status := self.request.query_params.get("status"):
            qs = qs.filter(status=run_status)
        return qs

    @extend_schema(
        responses={
            200: inline_serializer(
                "RunLog",
                {"id": serializers.IntegerField(), "status": serializers.CharField(), "finished": serializers.BooleanField(), "log": serializers.CharField()},
            )
        }
    )
    @action(detail=True, methods=["get"])
    def log(self, request, pk=None):
        """The last 16 KB of the run's output (secrets masked)."""
        run = self.get_object()
        return Response({"id": run.pk, "status": run.status, "finished": not run.is_active, "log": run.log_tail})

    @extend_schema(request=None, responses={200: RunSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel an active run (no refund); 409 when it already ended."""
        run = self.get_object()
        if not cancel_run(run):
            raise Conflict(f"The run already ended ({run.status}).")
        return Response(RunSerializer(run).data)


class PresetViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = PresetSerializer
    queryset = Preset.objects.all()
    lookup_field = "slug"
    pagination_class = None
