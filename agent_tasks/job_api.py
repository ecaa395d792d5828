"""The jobs API: start a job (agents × deployments × tasks × attempts, within a budget), follow it, read its
trials, compare two paired by task, cancel it, export it in Harbor's layout."""

from django.db.models import Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from belvedir.core.ids import is_id, parse_id
from belvedir.core.permissions import request_project
from billing.actions import parse_dollars
from billing.errors import TopUpError
from evals.models import Deployment

from . import harbor_export, jobs, regrades, results
from .comparison import compare_jobs
from .egress_record import denied_reaches, egress_record
from .job_views import outputs_download
from .models import Grade, Job, Regrade, TaskSet, Trial


class TrialSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="task.name", read_only=True)
    flagged = serializers.BooleanField(source="is_flagged", read_only=True)
    egress_flags = serializers.SerializerMethodField(help_text="A benchmark's or a denied host the agent reached or tried, from the egress record.")
    deployment = serializers.CharField(source="deployment.name", read_only=True, default=None)
    contestant = serializers.CharField(read_only=True)

    class Meta:
        model = Trial
        fields = [
            "id", "job", "task", "agent", "deployment", "contestant", "attempt", "status", "reward", "flagged", "flag_reasons", "egress_flags",
            "error", "platform_fault", "agent_exit", "verifier_exit", "agent_seconds", "verifier_seconds", "runtime", "limits",
            "verifier_mode", "graded_digest", "price_cents", "input_tokens", "output_tokens", "created_at", "started_at", "finished_at",
        ]  # fmt: skip

    def get_egress_flags(self, trial) -> list[str]:
        return denied_reaches(egress_record(trial), trial.job.deny_hosts if trial.job_id else ())


class TrialDetailSerializer(TrialSerializer):
    egress = serializers.SerializerMethodField()
    trace_session = serializers.SerializerMethodField()
    outputs = serializers.SerializerMethodField()

    class Meta(TrialSerializer.Meta):
        fields = [*TrialSerializer.Meta.fields, "agent_output", "verifier_output", "trajectory", "egress", "trace_session", "outputs"]

    @extend_schema_field({"type": "object", "nullable": True})
    def get_outputs(self, trial) -> dict | None:
        """The declared outputs its agent produced, as kept: their digest (what the verifier graded), size, what was not
        kept and why, and where to download them; null when the task declares none or none were kept."""
        kept = trial.kept_outputs
        if kept is None:
            return None
        url = self.context["request"].build_absolute_uri(reverse("trial-outputs", args=[trial.pk]))
        return {"digest": kept.digest, "size": kept.size, "file_count": kept.file_count, "dropped": kept.dropped, "url": url}

    def get_egress(self, trial) -> list[dict]:
        return egress_record(trial)

    @extend_schema_field({"type": "object", "nullable": True})
    def get_trace_session(self, trial) -> dict | None:
        """The spans its agent sent with the trial's own key (`bv traces show SESSION_ID`); null before any arrived."""
        session = trial.trace_sessions.first()
        if session is None:
            return None
        return {
            "session_id": session.session_id,
            "span_count": session.span_count,
            "url": self.context["request"].build_absolute_uri(reverse("api-session", args=[session.session_id])),
        }


class JobSerializer(serializers.ModelSerializer):
    task_set = serializers.CharField(source="version.task_set.name", read_only=True)
    version = serializers.IntegerField(source="version.number", read_only=True)
    deployments = serializers.SlugRelatedField(many=True, read_only=True, slug_field="name")
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id", "name", "purpose", "status", "status_message", "task_set", "version", "agents", "deployments", "tasks", "attempts", "budget_cents",
            "charged_cents", "runtime", "deny_hosts", "agent_commands", "progress", "created_at", "finished_at",
        ]  # fmt: skip

    def get_progress(self, job) -> dict:
        return jobs.progress(job)


class JobDetailSerializer(JobSerializer):
    results = serializers.SerializerMethodField()

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "results"]

    def get_results(self, job) -> list[dict]:
        return results.summary(job, set_aside_flagged=self.context.get("set_aside_flagged", False))


class JobCreateSerializer(serializers.Serializer):
    task_set = serializers.CharField(help_text="Task set name or id.")
    version = serializers.IntegerField(required=False, min_value=1, help_text="Its version number; the latest by default.")
    agents = serializers.ListField(child=serializers.CharField(max_length=50), min_length=1, max_length=20)
    deployments = serializers.ListField(child=serializers.CharField(max_length=100), required=False, default=list, max_length=20)
    tasks = serializers.ListField(child=serializers.CharField(max_length=100), required=False, default=list, max_length=5000)
    attempts = serializers.IntegerField(default=1, min_value=1, max_value=jobs.MAX_ATTEMPTS)
    budget = serializers.CharField(max_length=20, help_text='Dollars its trials may be charged in all, e.g. "5" or "2.50".')
    runtime = serializers.ChoiceField(choices=jobs.RUNTIMES, default="auto")
    deny_hosts = serializers.ListField(child=serializers.CharField(max_length=253), required=False, default=list, max_length=100)
    agent_commands = serializers.DictField(
        child=serializers.CharField(max_length=2000),
        required=False,
        default=dict,
        help_text='How each agent named pip:PACKAGE or npm:PACKAGE is run once installed, e.g. {"pip:mini-swe-agent": "mini -t \\"$(cat $AGENT_INSTRUCTION_FILE)\\" --yolo"}.',
    )
    name = serializers.CharField(max_length=100, required=False, default="", allow_blank=True)


def _by_name_or_id(queryset, value: str):
    return queryset.filter(Q(name=value) | Q(pk=parse_id(value))).first()


def flag(request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in {"1", "true", "yes", "on"}


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = Job.objects.none()

    def get_queryset(self):
        found = Job.objects.for_user(self.request.user, request_project(self.request)).select_related("version__task_set").prefetch_related("deployments")
        return jobs.with_progress(found) if self.action == "list" else found

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "set_aside_flagged": flag(self.request, "set_aside_flagged")}

    @extend_schema(request=JobCreateSerializer, responses={201: JobSerializer})
    def create(self, request):
        """Start a job: every agent (once per deployment when it calls a model) on every task (or those named),
        `attempts` times, each trial charged at its start within `budget`. 400 names what is wrong; nothing is
        stored or charged then."""
        payload = JobCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data, project = payload.validated_data, request_project(request)
        task_set = _by_name_or_id(TaskSet.objects.filter(project=project), data["task_set"])
        if task_set is None:
            return Response({"task_set": [f"No task set {data['task_set']!r} in this project."]}, status=400)
        versions = task_set.versions.all()
        version = versions.filter(number=data["version"]).first() if "version" in data else versions.first()
        if version is None:
            return Response({"version": [f"{task_set.name} has no version {data.get('version')}."]}, status=400)
        deployments = []
        for value in data["deployments"]:
            found = _by_name_or_id(Deployment.objects.filter(project=project), value)
            if found is None:
                return Response({"deployments": [f"No deployment {value!r} in this project."]}, status=400)
            deployments.append(found)
        try:
            budget = parse_dollars(data["budget"])
        except TopUpError as exc:
            return Response({"budget": [str(exc)]}, status=400)
        job = jobs.create_job(
            project,
            request.user,
            version=version,
            agents=data["agents"],
            deployments=deployments,
            tasks=data["tasks"],
            attempts=data["attempts"],
            budget_cents=budget,
            runtime=data["runtime"],
            deny_hosts=data["deny_hosts"],
            name=data["name"],
            agent_commands=data["agent_commands"],
        )
        return Response(JobSerializer(self.get_queryset().get(pk=job.pk)).data, status=201)

    @extend_schema(responses={200: TrialSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def trials(self, request, pk=None):
        """The job's trials, paged (?status= to filter)."""
        job = self.get_object()
        trials = (
            job.trials.select_related("task", "deployment").defer("task__archive", "agent_output", "verifier_output", "trajectory").order_by("attempt", "pk")
        )
        if status := request.query_params.get("status"):
            trials = trials.filter(status=status)
        page = self.paginate_queryset(trials)
        return self.get_paginated_response(TrialSerializer(page, many=True).data)

    @action(detail=True, methods=["get"], url_path=r"compare/(?P<other>\d+)")
    def compare(self, request, pk=None, other=None):
        """B (`other`) against A (this job), paired by task: each side's mean reward per task, the paired delta with
        its interval, McNemar (one attempt) or a paired t, the tasks that moved, a verdict and `gate`. Name a side's
        column with ?contestant_a= / ?contestant_b= when a job has several; ?set_aside_flagged=1 leaves flagged
        trials out (listed)."""
        a = self.get_object()
        b = get_object_or_404(self.get_queryset(), pk=other)
        params = request.query_params
        return Response(
            compare_jobs(
                a, b, contestant_a=params.get("contestant_a"), contestant_b=params.get("contestant_b"), set_aside_flagged=flag(request, "set_aside_flagged")
            )
        )

    @action(detail=True, methods=["post"], url_path="retry-errors")
    def retry_errors(self, request, pk=None):
        """Try each errored trial again as a new trial of the same task, contestant and attempt (charged at its
        start, within the budget); the errored ones stay listed."""
        job = self.get_object()
        retried = jobs.retry_errors(job)
        return Response({**JobSerializer(self.get_queryset().get(pk=job.pk)).data, "retried": retried})

    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Stop the job: trials not started are skipped (never charged); those running finish."""
        job = self.get_object()
        skipped = jobs.cancel(job)
        return Response({**JobSerializer(self.get_queryset().get(pk=job.pk)).data, "skipped": skipped})

    @extend_schema(request={"application/json": {"type": "object", "properties": {"version": {"type": "integer"}}}}, responses={201: {"type": "object"}})
    @action(detail=True, methods=["post"])
    def regrade(self, request, pk=None):
        """Grade the job's trials again by another version of its task set ({"version": N}), from the outputs they kept:
        201 with the regrade. Each grade is charged at its start; trials that cannot be regraded are listed as skipped."""
        job = self.get_object()
        number = request.data.get("version")
        version = job.version.task_set.versions.filter(number=number).first() if is_id(number) else None
        if version is None:
            return Response({"version": [f"A version number of {job.version.task_set.name}."]}, status=400)
        regrade = regrades.start(job, version, request.user)
        return Response(RegradeSerializer(regrade, context=self.get_serializer_context()).data, status=201)

    @extend_schema(responses={(200, "application/zip"): {"type": "string", "format": "binary"}})
    @action(detail=True, methods=["get"])
    def export(self, request, pk=None):
        """The job in Harbor's job layout (a zip): config.json, result.json with Terminal-Bench 2's rules checked,
        and per trial its config.json, result.json, outputs and egress record."""
        job = self.get_object()
        response = HttpResponse(harbor_export.export(job), content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="job-{job.pk}.zip"'
        return response


class GradeSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="trial.task.name", read_only=True)
    contestant = serializers.CharField(source="trial.contestant", read_only=True)
    attempt = serializers.IntegerField(source="trial.attempt", read_only=True)
    old_reward = serializers.FloatField(source="trial.reward", read_only=True)

    class Meta:
        model = Grade
        fields = [
            "id", "trial", "task", "contestant", "attempt", "status", "old_reward", "reward", "error", "platform_fault",
            "verifier_exit", "verifier_seconds", "graded_digest", "runtime", "price_cents", "started_at", "finished_at",
        ]  # fmt: skip


class RegradeSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(source="version.number", read_only=True)
    comparison = serializers.SerializerMethodField()

    class Meta:
        model = Regrade
        fields = ["id", "job", "version", "status", "charged_cents", "comparison", "created_at", "finished_at"]

    @extend_schema_field({"type": "object"})
    def get_comparison(self, regrade) -> dict:
        """Old against new reward, paired: delta, interval, test, verdict, the trials that moved, grades by status."""
        return regrades.comparison(regrade)


class RegradeViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Regrade.objects.none()
    serializer_class = RegradeSerializer

    def get_queryset(self):
        return Regrade.objects.for_user(self.request.user, request_project(self.request)).select_related("version")

    @extend_schema(responses={200: GradeSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def grades(self, request, pk=None):
        """The regrade's grades, paged: each trial's old and new reward, or why it was skipped."""
        grades = self.get_object().grades.select_related("trial__task", "trial__deployment").defer("trial__task__archive", "verifier_output").order_by("pk")
        page = self.paginate_queryset(grades)
        return self.get_paginated_response(GradeSerializer(page, many=True).data)

    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Stop it: grades not started are skipped (any charged, refunded); those running finish."""
        regrade = self.get_object()
        skipped = regrades.cancel(regrade)
        return Response({**RegradeSerializer(self.get_queryset().get(pk=regrade.pk)).data, "skipped": skipped})


class TrialViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Trial.objects.none()
    serializer_class = TrialDetailSerializer

    def get_queryset(self):
        return Trial.objects.for_user(self.request.user, request_project(self.request)).select_related("task", "deployment").defer("task__archive")

    @extend_schema(responses={(200, "application/gzip"): {"type": "string", "format": "binary"}})
    @action(detail=True, methods=["get"], url_path="outputs", url_name="outputs")
    def outputs(self, request, pk=None):
        """The declared outputs its agent produced, as kept: a .tar.gz (404 when none were)."""
        return outputs_download(self.get_object())
