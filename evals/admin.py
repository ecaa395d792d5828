from django.contrib import admin
from django.db import models

from .models import CachedResponse, Dataset, DatasetRow, DatasetVersion, Deployment, Eval, JudgeLabel, Sample, SampleAttempt, Suite, SuiteRun


@admin.register(Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "project",
        "base_url",
        "model",
        "api_style",
        "max_in_flight",
        "input_price_per_million",
        "output_price_per_million",
        "cache_ttl_seconds",
        "served_fingerprint",
    ]
    list_filter = ["api_style"]
    search_fields = ["name", "model", "base_url", "project__name"]
    list_select_related = ["project"]
    exclude = ["api_key"]  # secret: never shown, not even to staff
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "version", "row_count", "created_at"]
    search_fields = ["name", "project__name"]
    list_filter = ["created_at"]
    list_select_related = ["project"]
    raw_id_fields = ["project", "created_by"]


@admin.register(DatasetVersion)
class DatasetVersionAdmin(admin.ModelAdmin):
    list_display = ["dataset", "number", "row_count", "added", "edited", "removed", "note", "created_by", "created_at"]
    search_fields = ["=dataset__id", "dataset__name", "note"]
    list_filter = ["created_at"]
    list_select_related = ["dataset", "created_by"]
    raw_id_fields = ["dataset", "created_by"]


@admin.register(DatasetRow)
class DatasetRowAdmin(admin.ModelAdmin):
    # Versions are immutable: a row is changed by a new version (the dataset's page, the API), never in place here.
    list_display = ["dataset", "position", "since_version", "until_version", "input_format", "input_preview"]
    search_fields = ["=dataset__id", "input"]
    list_filter = ["input_format"]
    list_select_related = ["dataset"]
    raw_id_fields = ["dataset"]
    show_full_result_count = False

    @admin.display(description="input")
    def input_preview(self, row):
        return row.input[:80]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(Eval)
class EvalAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "project",
        "benchmark",
        "dataset",
        "deployment",
        "suite_run",
        "status",
        "done_count",
        "total",
        "error_count",
        "score",
        "cost",
        "cache_hits",
        "cache_misses",
        "reused_from_eval",
        "created_at",
    ]
    list_filter = ["status", "benchmark", "cache", "created_at"]
    # A cell key found whole: the evals that are one cell (reused, or forced again).
    search_fields = ["=id", "=suite_run__id", "=cell_key", "benchmark", "project__name", "deployment__name"]
    list_select_related = ["project", "dataset", "deployment"]
    raw_id_fields = ["project", "deployment", "dataset", "created_by", "same_rows_as", "suite_run", "judge", "rescored_from", "reused_from", "decide_against"]
    # Made by evals/suites/cells.py from what decides the answers: an edit would make a cell reuse what it should not;
    # the serving stack is what the server said, not an opinion.
    readonly_fields = ["cell_key", "serving_stack"]

    @admin.display(description="reused from", ordering="reused_from")
    def reused_from_eval(self, ev):
        # The id only: no join per listed row.
        return f"#{ev.reused_from_id}" if ev.reused_from_id else ""


@admin.register(Sample)
class SampleAdmin(admin.ModelAdmin):
    list_display = ["eval", "row_index", "score", "error", "latency_ms"]
    list_filter = ["score"]
    search_fields = ["=eval__id", "input"]
    raw_id_fields = ["eval"]
    show_full_result_count = False


@admin.register(SampleAttempt)
class SampleAttemptAdmin(admin.ModelAdmin):
    list_display = ["eval", "row_index", "error", "prompt_tokens", "completion_tokens", "at"]
    search_fields = ["=eval__id"]
    raw_id_fields = ["eval"]
    show_full_result_count = False


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "created_at"]
    search_fields = ["name", "project__name"]
    list_select_related = ["project"]
    raw_id_fields = ["project", "created_by"]


@admin.register(SuiteRun)
class SuiteRunAdmin(admin.ModelAdmin):
    list_display = ["id", "suite_name", "project", "judge", "max_cost", "epochs", "force", "cache", "created_at"]
    list_filter = ["suite_name", "force", "cache", "created_at"]
    search_fields = ["=id", "suite_name", "project__name"]
    list_select_related = ["project", "judge"]
    raw_id_fields = ["project", "judge", "same_rows_as", "created_by"]
    filter_horizontal = ["deployments"]


@admin.register(JudgeLabel)
class JudgeLabelAdmin(admin.ModelAdmin):
    list_display = ["sample", "turn", "judge_key", "judge_value", "value", "user", "created_at"]
    list_filter = ["judge_key"]
    search_fields = ["judge_key", "=sample__eval__id"]
    raw_id_fields = ["sample", "user"]
    list_select_related = ["sample", "user"]


@admin.register(CachedResponse)
class CachedResponseAdmin(admin.ModelAdmin):
    """Read-only: an answer is kept or removed (here, `manage.py response_cache clear`), never edited."""

    list_display = ["key_hash_short", "project", "deployment", "size", "hits", "system_fingerprint", "created_at", "last_hit_at"]
    list_filter = ["created_at", "last_hit_at"]
    search_fields = ["=key_hash", "=project__id", "deployment__name"]
    list_select_related = ["project", "deployment"]
    fields = ["project", "deployment", "key_hash", "system_fingerprint", "size", "hits", "created_at", "last_hit_at", "request", "answer"]
    readonly_fields = fields
    show_full_result_count = False

    @admin.display(description="key")
    def key_hash_short(self, answer):
        return answer.key_hash[:16]

    @admin.display(description="request (the whole key)")
    def request(self, answer):
        return answer.key[:5000] + ("…" if len(answer.key) > 5000 else "")

    @admin.display(description="answer")
    def answer(self, answer):
        body = bytes(answer.body)
        return body[:5000].decode(errors="replace") + ("…" if len(body) > 5000 else "")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
