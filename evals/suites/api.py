"""The suites API: suites (built-in and the project's own), suite runs with their table, comparisons and the CI gate, and judges' cards."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action, api_view
from rest_framework.response import Response

from belvedir.core.permissions import request_project

from ..api import deployment_by_name_or_id, flag
from ..models import CacheMode, Deployment, Suite, SuiteRun
from ..scoring.calibration import card, judge_keys_of
from .actions import (
    BUILTIN,
    BUILTIN_DESCRIPTIONS,
    SuiteError,
    builtin_entries,
    cancel_suite_run,
    create_suite_run,
    progress,
    resume_suite_run,
    retry_suite_errors,
    save_suite,
    status_of,
)
from .comparison import cell, compare_suite_runs, suite_table


class SuiteSerializer(serializers.ModelSerializer):
    builtin = serializers.SerializerMethodField()

    class Meta:
        model = Suite
        fields = ["id", "name", "description", "entries", "builtin", "created_at"]
        read_only_fields = ["id", "created_at"]

    def get_builtin(self, suite) -> bool:
        return False


class SuiteWriteSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    description = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    entries = serializers.JSONField(help_text='Benchmarks: names, or {"benchmark", "sample_limit", "mode", "options"}.')


def builtin_suites() -> list[dict]:
    return [{"id": None, "name": name, "description": BUILTIN_DESCRIPTIONS[name], "entries": builtin_entries(name), "builtin": True} for name in BUILTIN]


class SuiteViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    serializer_class = SuiteSerializer
    queryset = Suite.objects.none()
    pagination_class = None

    def get_queryset(self):
        return Suite.objects.for_user(self.request.user, request_project(self.request))

    def list(self, request):
        """The built-in suites (core, quick) and the project's own."""
        return Response(builtin_suites() + SuiteSerializer(self.get_queryset(), many=True).data)

    @extend_schema(request=SuiteWriteSerializer, responses={201: SuiteSerializer})
    def create(self, request):
        payload = SuiteWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        suite = save_suite(request_project(request), request.user, data["name"], data["entries"], data["description"])
        return Response(SuiteSerializer(suite).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=SuiteWriteSerializer, responses={200: SuiteSerializer})
    def update(self, request, pk=None):
        payload = SuiteWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        suite = save_suite(request_project(request), request.user, data["name"], data["entries"], data["description"], suite=self.get_object())
        return Response(SuiteSerializer(suite).data)


class SuiteRunSerializer(serializers.ModelSerializer):
    deployments = serializers.SerializerMethodField()
    judge = serializers.CharField(source="judge.name", read_only=True, allow_null=True, default=None)
    status = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()

    class Meta:
        model = SuiteRun
        fields = [
            "id",
            "suite_name",
            "entries",
            "deployments",
            "judge",
            "same_rows_as",
            "max_cost",
            "epochs",
            "force",
            "cache",
            "notes",
            "status",
            "progress",
            "created_at",
        ]

    def get_deployments(self, run) -> list[str]:
        return [d.name for d in run.deployments.order_by("name")]

    def get_status(self, run) -> str:
        return status_of(progress(run))

    def get_progress(self, run) -> dict:
        return progress(run)


class SuiteRunDetailSerializer(SuiteRunSerializer):
    table = serializers.SerializerMethodField(
        help_text="Per benchmark, each deployment's cell: its eval, status, score with interval, errors, cost, and reused_from (the eval whose rows it copied, or null)."
    )

    class Meta(SuiteRunSerializer.Meta):
        fields = [*SuiteRunSerializer.Meta.fields, "table"]

    def get_table(self, run) -> list[dict]:
        table = suite_table(run)
        names = [d.name for d in table["deployments"]]
        return [{"benchmark": row["benchmark"], "cells": dict(zip(names, map(cell, row["cells"]), strict=True))} for row in table["rows"]]


class SuiteRunCreateSerializer(serializers.Serializer):
    suite = serializers.CharField(required=False, allow_blank=True, default="", help_text="core, quick, or one of the project's suites.")
    benchmarks = serializers.JSONField(required=False, default=None, help_text="Instead of `suite`: the entries themselves.")
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=100, help_text="A name for an ad-hoc list of benchmarks.")
    deployments = serializers.ListField(child=serializers.CharField(), min_length=1, help_text="Deployment names or ids.")
    judge = serializers.CharField(required=False, allow_null=True, allow_blank=True, default=None, help_text="Judged benchmarks' judge (name or id).")
    same_rows_as = serializers.IntegerField(required=False, allow_null=True, default=None, help_text="Each benchmark's rows from this suite run.")
    max_cost = serializers.DecimalField(max_digits=14, decimal_places=6, required=False, allow_null=True, default=None, min_value=0)
    epochs = serializers.IntegerField(required=False, min_value=1, max_value=10, default=1)
    force = serializers.BooleanField(required=False, default=False, help_text="Run every cell, even one a finished eval of the project already answers.")
    cache = serializers.ChoiceField(choices=CacheMode.choices, required=False, default=CacheMode.AUTO, help_text="Each eval's response cache mode.")


class ResumeSuiteSerializer(serializers.Serializer):
    max_cost = serializers.DecimalField(max_digits=14, decimal_places=6, required=False, allow_null=True, default=None, min_value=0)


def deployments_named(project, names) -> list[Deployment]:
    found = []
    for name in names:
        deployment = deployment_by_name_or_id(project, name)
        if deployment is None:
            raise SuiteError(f"No deployment {name!r} in this project.")
        found.append(deployment)
    return found


class SuiteRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = SuiteRunSerializer
    queryset = SuiteRun.objects.none()

    def get_queryset(self):
        return SuiteRun.objects.for_user(self.request.user, request_project(self.request)).select_related("judge")

    def get_serializer_class(self):
        return SuiteRunDetailSerializer if self.action == "retrieve" else SuiteRunSerializer

    @extend_schema(request=SuiteRunCreateSerializer, responses={201: SuiteRunDetailSerializer})
    def create(self, request):
        """Run a suite against one or more deployments: every eval checked first, none started when one is refused (400).

        A cell a finished eval of the project already answers is reused (created succeeded with its rows, at no cost) unless `force`."""
        payload = SuiteRunCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data, project = payload.validated_data, request_project(request)
        if bool(data["suite"]) == bool(data["benchmarks"]):
            raise SuiteError("Give either `suite` (core, quick or one of yours) or `benchmarks` (a list), not both.")
        judge = deployments_named(project, [data["judge"]])[0] if data["judge"] else None
        source = None
        if data["same_rows_as"] is not None:
            source = self.get_queryset().filter(pk=data["same_rows_as"]).first()
            if source is None:
                raise SuiteError(f"No suite run #{data['same_rows_as']} in this project.")
        run = create_suite_run(
            project,
            request.user,
            deployments=deployments_named(project, data["deployments"]),
            suite_name=data["suite"] or data["name"],
            entries=data["benchmarks"],
            judge=judge,
            same_rows_as=source,
            max_cost=data["max_cost"],
            epochs=data["epochs"],
            force=data["force"],
            cache=data["cache"],
        )
        return Response(SuiteRunDetailSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: SuiteRunSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel every eval of the run still pending, queued or running; finished samples are kept."""
        run = self.get_object()
        return Response({"cancelled": cancel_suite_run(run), "suite_run": SuiteRunSerializer(run).data})

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="retry-errors")
    def retry_errors(self, request, pk=None):
        """Ask again only the errored samples of every eval of the run (409 while it runs)."""
        run = self.get_object()
        return Response({"retried": retry_suite_errors(run), "suite_run": SuiteRunSerializer(run).data})

    @extend_schema(request=ResumeSuiteSerializer, responses={200: dict})
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        """Continue the run's interrupted evals (a new max_cost for one stopped at its budget)."""
        run = self.get_object()
        payload = ResumeSuiteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        return Response({"resumed": resume_suite_run(run, max_cost=payload.validated_data["max_cost"]), "suite_run": SuiteRunSerializer(run).data})

    @extend_schema(
        parameters=[OpenApiParameter("deployment_a", str), OpenApiParameter("deployment_b", str), OpenApiParameter("set_aside_flaky", bool)],
        responses={200: dict, 400: dict},
    )
    @action(detail=True, methods=["get"], url_path=r"compare/(?P<other>\d+)")
    def compare(self, request, pk=None, other=None):
        """Suite run B (`other`) against A (this one), per benchmark on paired rows, the verdicts corrected with Holm;
        `gate` is "fail" when any benchmark is significantly worse after correction. 400 when the runs' rows differ."""
        a = self.get_object()
        b = get_object_or_404(self.get_queryset(), pk=other)
        project = request_project(request)
        sides = {}
        for name in ("deployment_a", "deployment_b"):
            value = request.query_params.get(name)
            sides[name] = deployments_named(project, [value])[0] if value else None
        return Response(compare_suite_runs(a, b, **sides, set_aside_flaky=flag(request, "set_aside_flaky")))


@extend_schema(responses={200: dict})
@api_view(["GET"])
def judges(request):
    """The calibration card of every judge that graded an eval of this project."""
    project = request_project(request)
    return Response([card(project, key) for key in judge_keys_of(project)])
