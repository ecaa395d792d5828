from django.contrib import admin
from django.utils import timezone

from belvedir.core.models import Project

from .backlog import STALE_SECONDS
from .models import BatchProcessor, Evaluator, EvaluatorLabel, EvaluatorScore, IngestRejection, Span, Task, TaskGroup, TraceBatch, TraceSession
from .otlp import TRACE_ID


@admin.register(TraceSession)
class TraceSessionAdmin(admin.ModelAdmin):
    list_display = [
        "session_id",
        "user_id",
        "project",
        "last_span_at",
        "span_count",
        "input_tokens",
        "output_tokens",
        "outcome",
        "run",
        "trial",
        "needs_processing",
    ]
    list_filter = ["outcome", "needs_processing", "last_span_at"]
    search_fields = ["=session_id", "=user_id", "project__name"]
    list_select_related = ["project", "run", "trial"]
    raw_id_fields = ["project", "run", "trial"]
    show_full_result_count = False


@admin.register(Span)
class SpanAdmin(admin.ModelAdmin):
    list_display = ["name", "session_id", "trace_id", "span_kind", "model", "latency_ms", "start_time"]
    list_filter = ["span_kind", "status_code"]
    search_fields = ["=trace_id", "=session_id"]
    search_help_text = "A trace id (32 hex digits) or a session id, exactly."
    raw_id_fields = ["project", "task"]
    # Spans are the biggest table: no COUNT(*) on every changelist page.
    show_full_result_count = False

    def get_search_results(self, request, queryset, search_term):
        # Indexed lookups instead of an OR across columns (a full scan).
        # A trace id: the unique constraint's (project, trace_id, …) index,
        # given the project ids as a list, which PostgreSQL probes once per
        # project (with a subquery it read the whole index). Spans have no
        # index of trace ids alone: it cost ingest a tenth of its COPY.
        # A session id: through its sessions' projects, for the
        # (project, session_id) index.
        term = search_term.strip()
        if not term:
            return queryset, False
        if TRACE_ID.match(term.lower()):
            return queryset.filter(project_id__in=list(Project.objects.values_list("pk", flat=True)), trace_id=term.lower()), False
        projects = TraceSession.objects.filter(session_id=term).values("project_id")
        return queryset.filter(project_id__in=projects, session_id=term), False


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["name", "session", "group", "span_count", "excluded_from_training", "started_at"]
    list_filter = ["excluded_from_training"]
    search_fields = ["name", "session__session_id", "group__name"]
    raw_id_fields = ["project", "session", "group"]
    list_select_related = ["session", "group"]


@admin.register(TaskGroup)
class TaskGroupAdmin(admin.ModelAdmin):
    list_display = ["name", "key", "project", "created_at"]
    search_fields = ["name", "key"]
    list_filter = ["created_at"]
    list_select_related = ["project"]


@admin.register(TraceBatch)
class TraceBatchAdmin(admin.ModelAdmin):
    """Accepted ingest requests not stored yet: a long list means the batch processors are behind or down."""

    list_display = ["pk", "project", "span_count", "content_type", "content_encoding", "received_at"]
    list_filter = ["content_type"]
    search_fields = ["project__name"]
    list_select_related = ["project"]
    exclude = ["body"]
    show_full_result_count = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(BatchProcessor)
class BatchProcessorAdmin(admin.ModelAdmin):
    """The running `process_trace_batches`: none live while batches wait means nothing is storing them."""

    list_display = ["name", "live", "spans_per_second", "seconds_per_batch", "seen_at"]
    search_fields = ["name"]
    search_help_text = "A host name, or host:pid."

    @admin.display(boolean=True, description=f"Seen in the last {STALE_SECONDS:g} s")
    def live(self, obj):
        return (timezone.now() - obj.seen_at).total_seconds() <= STALE_SECONDS

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(IngestRejection)
class IngestRejectionAdmin(admin.ModelAdmin):
    list_display = ["created_at", "project", "api_key", "rejected", "reasons", "received_at"]
    list_filter = ["created_at"]
    search_fields = ["project__name"]
    list_select_related = ["project", "api_key"]
    raw_id_fields = ["project", "api_key"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Evaluator)
class EvaluatorAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "scorer_label", "target", "sample_rate", "enabled", "version", "judge", "daily_budget", "created_at"]
    list_filter = ["enabled"]
    search_fields = ["name", "project__name"]
    list_select_related = ["project", "judge"]
    raw_id_fields = ["project", "task_group", "harness", "judge", "created_by"]


@admin.register(EvaluatorScore)
class EvaluatorScoreAdmin(admin.ModelAdmin):
    list_display = ["evaluator", "version", "session", "task", "status", "value", "attempts", "cost", "session_at", "scored_at"]
    list_filter = ["status"]
    search_fields = ["=session__session_id", "evaluator__name"]
    list_select_related = ["evaluator", "session", "task"]
    raw_id_fields = ["evaluator", "project", "session", "task", "task_group"]
    show_full_result_count = False


@admin.register(EvaluatorLabel)
class EvaluatorLabelAdmin(admin.ModelAdmin):
    list_display = ["score", "judge_key", "judge_value", "value", "user", "created_at"]
    list_filter = ["judge_key"]
    search_fields = ["judge_key", "=score__session__session_id"]
    raw_id_fields = ["score", "user"]
