import math

from django.conf import settings
from django.db.models import Count, FloatField, Q
from django.db.models.functions import Cast, NullIf
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.core.collector import collector_paused
from belvedir.core.ids import parse_id
from belvedir.core.models import ApiKey
from belvedir.core.permissions import HasIngestScope, request_project
from belvedir.core.throttle import IngestThrottle

from . import batches, diff, otlp, trajectory, workload_keys
from .actions import report_outcome
from .evaluator_api import EvaluatorScoreSerializer
from .evaluator_rules import session_scores
from .evaluators import filter_by_score
from .filters import by_user_and_metadata
from .ingest import foreign_in_body
from .models import Span, Task, TaskGroup, TraceSession
from .training import training_data_response

# Read at most one byte past the limit: an oversized body is refused unread.
READ_LIMIT = otlp.MAX_BODY_BYTES + 1
READ_PIECE = 64 * 1024


def read_body(django_request) -> bytes:
    """The request body, up to one byte past the limit, sized or chunked.

    OpenTelemetry's JavaScript exporters send `Transfer-Encoding: chunked`
    without a Content-Length, and Django reads such a body as empty. gunicorn
    de-chunks it and says so with `wsgi.input_terminated` (the stream ends
    where the body does), so it is read straight from `wsgi.input`, in pieces.
    Django's development server (wsgiref) passes chunk framing through: that
    is refused with 411 rather than parsed as an empty or garbled body.
    """
    environ = django_request.environ
    if environ.get("CONTENT_LENGTH"):
        return django_request.read(READ_LIMIT)
    if "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        return b""
    if not environ.get("wsgi.input_terminated"):
        raise otlp.IngestError(411, "This server cannot read chunked request bodies: send Content-Length, or serve with gunicorn (as `make run` does).")
    stream, pieces, size = environ["wsgi.input"], [], 0
    while size < READ_LIMIT and (piece := stream.read(min(READ_PIECE, READ_LIMIT - size))):
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces)


class TraceIngest(APIView):
    """OTLP/HTTP trace export (JSON or protobuf, optionally gzip). Project or per-run ingest keys.

    Answers once the body is checked and kept (traces/batches.py); a worker
    stores its spans, normally within a second or two.
    """

    permission_classes = [HasIngestScope]
    throttle_classes = [IngestThrottle]
    parser_classes = []

    @extend_schema(request={"application/json": dict, "application/x-protobuf": bytes}, responses={200: dict})
    def post(self, request):
        if (lag := batches.lag_past_limit()) is not None:
            detail = f"Trace storage is {lag:.1f} s behind (is `manage.py process_trace_batches` running?); send this batch again shortly."
            # Come back when the backlog should be under the limit again: sooner only costs another refused upload.
            retry_after = max(1, math.ceil(lag - settings.TRACE_INGEST_MAX_LAG_SECONDS))
            return Response({"detail": detail}, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": str(retry_after)})
        as_protobuf = request.content_type.split(";")[0].strip().lower() in {"application/x-protobuf", "application/protobuf"}
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        with collector_paused():
            try:
                raw = read_body(request._request)
                body = otlp.decode_body(raw, encoding)
                checked = otlp.check(body, request.content_type)
            except otlp.IngestError as exc:
                return Response({"detail": exc.message}, status=exc.status)
            rejected, reasons, accepted = checked.rejected, checked.reasons, checked.accepted
            own_session = workload_keys.own_session(request.auth)
            # A workload's key: its answer counts the spans the worker will refuse to store (another session's; every
            # span once its workload has ended, and then nothing is kept at all).
            if own_session == "":
                rejected, reasons, accepted = rejected + accepted, [*reasons, workload_keys.only_its_own(own_session)], 0
            elif own_session is not None and (foreign := foreign_in_body(body, request.content_type, own_session)):
                rejected, reasons = rejected + foreign, [*reasons, workload_keys.only_its_own(own_session)]
            if accepted:
                # A database that is down answers 503 (DatabaseUnavailableMiddleware):
                # nothing was kept, and the exporter sends the batch again.
                key = request.auth if isinstance(request.auth, ApiKey) else None
                batch_id = batches.accept(request_project(request), key, raw, request.content_type, encoding, accepted, own_session=own_session)
                batches.process_inline(batch_id)
        content, media = otlp.success_response(rejected, reasons, as_protobuf)
        return HttpResponse(content, content_type=media, status=200)


class OutcomeSerializer(serializers.Serializer):
    session_id = serializers.CharField(max_length=255)
    outcome = serializers.ChoiceField(choices=["success", "fail"])


@extend_schema(request=OutcomeSerializer, responses={200: dict})
@api_view(["POST"])
@permission_classes([HasIngestScope])
def outcomes(request):
    """Report a session's real outcome; the latest report wins. 404 for an unknown session."""
    payload = OutcomeSerializer(data=request.data)
    payload.is_valid(raise_exception=True)
    session_id = payload.validated_data["session_id"]
    own_session = workload_keys.own_session(request.auth)
    if own_session is not None and session_id != own_session:
        return Response({"detail": workload_keys.only_its_own(own_session, does="reports")}, status=status.HTTP_403_FORBIDDEN)
    if own_session and not workload_keys.reports_outcome(own_session):
        # An agent must not decide how its own trial went (its outcome decides what training data keeps).
        return Response({"detail": "A trial's outcome is its verifier's reward: its key reports none."}, status=status.HTTP_403_FORBIDDEN)
    project = request_project(request)
    session = TraceSession.objects.filter(project=project, session_id=session_id).first()
    if session is None:
        # Its spans may be accepted and not stored yet (a client flushes, then reports).
        batches.store_waiting(project)
        session = TraceSession.objects.filter(project=project, session_id=session_id).first()
    if session is None:
        return Response({"detail": "No such session in this project (flush spans before reporting)."}, status=status.HTTP_404_NOT_FOUND)
    report_outcome(session, payload.validated_data["outcome"])
    return Response({"session_id": session.session_id, "outcome": session.outcome})


class SessionSerializer(serializers.ModelSerializer):
    run = serializers.PrimaryKeyRelatedField(read_only=True)
    trial = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = TraceSession
        fields = [
            "session_id",
            "user_id",
            "metadata",
            "first_span_at",
            "last_span_at",
            "span_count",
            "input_tokens",
            "output_tokens",
            "outcome",
            "run",
            "trial",
            "processed_at",
        ]


class SpanSerializer(serializers.ModelSerializer):
    task = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = Span
        fields = [
            "trace_id",
            "span_id",
            "parent_span_id",
            "name",
            "kind",
            "span_kind",
            "start_time",
            "end_time",
            "latency_ms",
            "status_code",
            "status_message",
            "model",
            "prompt",
            "completion",
            "input_tokens",
            "output_tokens",
            "user_id",
            "workflow_name",
            "attributes",
            "events",
            "resource",
            "task",
        ]


class TaskSerializer(serializers.ModelSerializer):
    group = serializers.CharField(source="group.name", default=None)

    class Meta:
        model = Task
        fields = ["id", "key", "name", "group", "first_user_message", "started_at", "ended_at", "span_count", "excluded_from_training"]


class SessionCursor(CursorPagination):
    # A cursor, not offsets: no COUNT(*) and no deep OFFSET on big tables.
    ordering = "-last_span_at"
    page_size = 50


class SessionList(generics.ListAPIView):
    serializer_class = SessionSerializer
    pagination_class = SessionCursor

    @extend_schema(
        parameters=[
            OpenApiParameter("outcome", str),
            OpenApiParameter("run", int),
            OpenApiParameter("user", str, description="Sessions of this user id."),
            OpenApiParameter("metadata", str, many=True, description="key=value; repeat for several (all must match)."),
            OpenApiParameter("evaluator", int, description="With score, score_below or score_above: sessions by this evaluator's scores."),
            OpenApiParameter("score", str, enum=["pass", "fail", "error"]),
            OpenApiParameter("score_below", float),
            OpenApiParameter("score_above", float),
        ]
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        qs = TraceSession.objects.for_user(self.request.user, request_project(self.request))
        params = self.request.query_params
        if params.get("outcome") in {"success", "fail"}:
            qs = qs.filter(outcome=params["outcome"])
        if run := parse_id(params.get("run")):
            qs = qs.filter(run_id=run)
        return filter_by_score(by_user_and_metadata(qs, params), params)


@extend_schema(responses={200: dict})
@api_view(["GET"])
def session_detail(request, session_id):
    """A session with its spans (in start order) and the tasks found in it."""
    session = generics.get_object_or_404(TraceSession.objects.for_user(request.user, request_project(request)), session_id=session_id)
    spans = Span.objects.filter(project=session.project, session_id=session.session_id)[:5000]
    tasks = session.tasks.select_related("group")
    scores = EvaluatorScoreSerializer(session_scores(session), many=True).data
    return Response(
        {**SessionSerializer(session).data, "spans": SpanSerializer(spans, many=True).data, "tasks": TaskSerializer(tasks, many=True).data, "scores": scores}
    )


STEP_FILTERS = [
    OpenApiParameter("kind", str, enum=list(trajectory.KINDS), description="llm, tool or span (other spans)."),
    OpenApiParameter("task", int, description="Only the steps of this task (an id from the session's tasks)."),
    OpenApiParameter("errors", bool, description="Only steps whose span ended in error."),
    OpenApiParameter("q", str, description="Text in a step's name, messages, attributes or status message."),
    OpenApiParameter("after", str, description="The cursor of the next page (`next` gives it)."),
    OpenApiParameter("page_size", int, description=f"1 to {trajectory.MAX_PAGE_SIZE}; {trajectory.PAGE_SIZE} by default."),
]


@extend_schema(parameters=STEP_FILTERS, responses={200: dict})
@api_view(["GET"])
def session_steps(request, session_id):
    """The session's trajectory: its steps in start order (LLM calls with their messages, tool calls, other spans), a page at a time."""
    session = generics.get_object_or_404(TraceSession.objects.for_user(request.user, request_project(request)), session_id=session_id)
    params = request.query_params
    prices = trajectory.model_prices(session.project_id)
    steps, cursor = trajectory.steps_page(session, params, size=trajectory.page_size(params), prices=prices)
    following = None
    if cursor:
        query = params.copy()
        query["after"] = cursor
        following = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
    summary = trajectory.summary([session], prices)
    summary["cost"] = None if summary["cost"] is None else str(summary["cost"])
    return Response(
        {"session_id": session.session_id, "outcome": session.outcome, "summary": summary, "steps": [s.as_dict() for s in steps], "next": following}
    )


@extend_schema(parameters=[OpenApiParameter("a", str, required=True), OpenApiParameter("b", str, required=True)], responses={200: dict})
@api_view(["GET"])
def session_diff(request):
    """Two sessions' steps aligned (by kind and tool name), the first divergent row, what changed per row, each side's totals."""
    scoped = TraceSession.objects.for_user(request.user, request_project(request))
    a, b = (request.query_params.get(side, "") for side in ("a", "b"))
    if not a or not b:
        return Response({"detail": "Give the two sessions as ?a=SESSION&b=SESSION."}, status=status.HTTP_400_BAD_REQUEST)
    session_a = generics.get_object_or_404(scoped, session_id=a)
    session_b = generics.get_object_or_404(scoped, session_id=b)
    return Response(diff.as_dict(diff.diff(session_a, session_b)))


class TaskGroupSerializer(serializers.ModelSerializer):
    task_count = serializers.IntegerField()
    success_rate = serializers.FloatField(allow_null=True)

    class Meta:
        model = TaskGroup
        fields = ["id", "key", "name", "task_count", "success_rate"]


def task_groups_with_stats(user, project):
    """The groups with their task count and success rate (None before any session has an outcome), in SQL so that a
    list can sort and page by them."""
    return TaskGroup.objects.for_user(user, project).annotate(
        task_count=Count("tasks"),
        success_count=Count("tasks", filter=Q(tasks__session__outcome="success")),
        judged_count=Count("tasks", filter=~Q(tasks__session__outcome="")),
        success_rate=Cast("success_count", FloatField()) / NullIf("judged_count", 0),
    )


@extend_schema(responses=TaskGroupSerializer(many=True))
@api_view(["GET"])
def task_groups(request):
    """Task groups across the project, with task counts and success rate (over sessions with an outcome)."""
    groups = list(task_groups_with_stats(request.user, request_project(request)))
    return Response(TaskGroupSerializer(groups, many=True).data)


@extend_schema(
    parameters=[
        OpenApiParameter("since", str, description="YYYY-MM-DD or ISO 8601"),
        OpenApiParameter("until", str),
        OpenApiParameter(
            "allow_benchmark_overlap", bool, description="Include tasks that overlap a catalog benchmark, each marked with a benchmark_overlap key"
        ),
        OpenApiParameter("show", str, enum=["overlaps"], description="List the tasks the benchmark check leaves out instead of the training lines"),
    ],
    responses={(200, "application/jsonl"): bytes},
)
@api_view(["GET"])
def training_data(request, pk):
    """The group's tasks not excluded from training, as OpenAI chat fine-tuning JSONL (streamed), checked against the benchmark catalog; the last line is the group's canary."""
    project = request_project(request)
    group = generics.get_object_or_404(TaskGroup.objects.for_user(request.user, project), pk=pk)
    # A bad parameter (400) or a catalog whose data is missing (503) is raised before the stream starts, and mapped by the exception handler.
    return training_data_response(project, group, request.query_params)
