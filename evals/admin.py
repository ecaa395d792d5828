from django.contrib import admin
from django.db import models

from .models import Dataset, DatasetRow, DatasetVersion, Deployment, Eval, JudgeLabel, Sample, SampleAttempt, Suite, SuiteRun


@admin.register(Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "base_url", "model", "api_style", "max_in_flight", "input_price_per_million", "output_price_per_million"]
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
        "created_at",
    ]
    list_filter = ["status", "benchmark", "created_at"]
    search_fields = ["=id", "=suite_run__id", "benchmark", "project__name", "deployment__name"]
    list_select_related = ["project", "dataset", "deployment"]
    raw_id_fields = ["project", "deployment", "dataset", "created_by", "same_rows_as", "suite_run", "judge", "rescored_from"]


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
    list_display = ["id", "suite_name", "project", "judge", "max_cost", "epochs", "created_at"]
    list_filter = ["suite_name", "created_at"]
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
