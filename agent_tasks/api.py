"""The task sets API: upload an archive as a set's version; list sets; a set with its versions and their tasks."""

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from belvedir.core.ids import is_id
from belvedir.core.permissions import request_project

from . import audits
from .actions import import_archive
from .forms import TaskSetUploadForm
from .job_api import JobSerializer
from .models import AgentTask, TaskSet, TaskSetVersion

FILE_SCHEMA = {"type": "string", "format": "binary"}


class AgentTaskSerializer(serializers.ModelSerializer):
    class Meta:
        model = AgentTask
        fields = [
            "name",
            "instruction",
            "agent_timeout_sec",
            "verifier_timeout_sec",
            "has_solution",
            "environment",
            "unknown_keys",
            "config",
            "digest",
            "file_count",
            "size",
        ]


class TaskSetVersionSerializer(serializers.ModelSerializer):
    task_set = serializers.IntegerField(source="task_set_id", read_only=True)
    tasks = AgentTaskSerializer(many=True, read_only=True)

    class Meta:
        model = TaskSetVersion
        fields = ["task_set", "number", "digest", "file_count", "total_bytes", "created_at", "tasks"]


class TaskSetSerializer(serializers.ModelSerializer):
    latest_version = serializers.SerializerMethodField()

    class Meta:
        model = TaskSet
        fields = ["id", "name", "latest_version", "created_at"]

    def get_latest_version(self, task_set) -> int | None:
        return max((v.number for v in task_set.versions.all()), default=None)


class TaskSetDetailSerializer(TaskSetSerializer):
    versions = TaskSetVersionSerializer(many=True, read_only=True)

    class Meta(TaskSetSerializer.Meta):
        fields = [*TaskSetSerializer.Meta.fields, "versions"]


class TaskSetViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = TaskSet.objects.none()
    pagination_class = None

    def get_serializer_class(self):
        return TaskSetDetailSerializer if self.action == "retrieve" else TaskSetSerializer

    def get_queryset(self):
        qs = TaskSet.objects.for_user(self.request.user, request_project(self.request))
        if self.action == "retrieve":
            tasks = AgentTask.objects.without_files()
            return qs.prefetch_related("versions", Prefetch("versions__tasks", queryset=tasks))
        return qs.prefetch_related("versions")

    @extend_schema(
        request={"multipart/form-data": {"type": "object", "properties": {"name": {"type": "string"}, "file": FILE_SCHEMA}}},
        responses={201: TaskSetVersionSerializer, 200: TaskSetVersionSerializer},
    )
    @extend_schema(
        request={"application/json": {"type": "object", "properties": {"version": {"type": "integer"}, "runtime": {"type": "string"}}}},
        responses={200: {"type": "object"}, 201: {"type": "object"}},
    )
    @action(detail=True, methods=["get", "post"])
    def audit(self, request, pk=None):
        """GET: what the newest audit of a version (?version=N, the latest by default) found per task: sound,
        hackable (naming the red team's attacks that scored), broken (its solution fails, or doing nothing passes),
        errored or pending. POST {"version": N, "runtime": "auto"}: start one, a job of the oracle, nop and the red
        team on every task with a solution, charged as a job's trials are (201, with the job)."""
        task_set = self.get_object()
        source = request.data if request.method == "POST" else request.query_params
        number = source.get("version")
        if number not in (None, "") and not is_id(number):
            return Response({"version": ["A version number."]}, status=400)
        versions = task_set.versions.all()
        version = versions.filter(number=number).first() if number not in (None, "") else versions.order_by("-number").first()
        if version is None:
            return Response({"version": [f"{task_set.name} has no version {number}." if number else f"{task_set.name} has no version."]}, status=400)
        if request.method == "GET":
            found = audits.summary(version)
            if found is None:
                return Response({"detail": f"Version {version.number} of {task_set.name} has not been audited: POST here to audit it."}, status=404)
            return Response({"task_set": task_set.pk, "version": version.number, **found})
        runtime = source.get("runtime") or "auto"
        job = audits.start(request_project(request), request.user, version, runtime=runtime)
        return Response({"task_set": task_set.pk, "version": version.number, **audits.summary(version), "job": JobSerializer(job).data}, status=201)

    def create(self, request):
        """Upload a .tar.gz or .zip of Harbor-format tasks as a task set's next version: 201 with the version and its
        tasks, or 200 with the version that already holds exactly these files. A task that breaks the format is
        refused (400) naming the file, the key and the reason, and nothing is stored."""
        form = TaskSetUploadForm(request.data, request.FILES)
        if not form.is_valid():
            return Response(form.errors, status=400)
        version, created = import_archive(request_project(request), request.user, form.cleaned_data["name"], form.cleaned_data["file"])
        version = TaskSetVersion.objects.prefetch_related(Prefetch("tasks", queryset=AgentTask.objects.without_files())).get(pk=version.pk)
        return Response(TaskSetVersionSerializer(version).data, status=201 if created else 200)
