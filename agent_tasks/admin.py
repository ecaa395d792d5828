from django.contrib import admin

from . import jobs, regrades
from .models import AgentTask, Grade, Job, Regrade, TaskSet, TaskSetVersion, Trial, TrialOutputs


class ReadOnlyAdmin(admin.ModelAdmin):
    """Task content is what a version's digest names: changing it here would make the digest lie."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(TaskSet)
class TaskSetAdmin(ReadOnlyAdmin):
    list_display = ["name", "project", "created_at"]
    search_fields = ["name", "project__name"]
    list_filter = ["created_at"]
    list_select_related = ["project"]


@admin.register(TaskSetVersion)
class TaskSetVersionAdmin(ReadOnlyAdmin):
    list_display = ["task_set", "number", "digest", "file_count", "total_bytes", "created_at"]
    search_fields = ["task_set__name", "digest"]
    list_filter = ["created_at"]
    list_select_related = ["task_set"]


@admin.register(AgentTask)
class AgentTaskAdmin(ReadOnlyAdmin):
    list_display = ["name", "version", "agent_timeout_sec", "verifier_timeout_sec", "has_solution"]
    search_fields = ["name", "version__task_set__name"]
    list_filter = ["has_solution"]
    list_select_related = ["version__task_set"]
    exclude = ["archive"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("archive")


@admin.register(Trial)
class TrialAdmin(ReadOnlyAdmin):
    list_display = ["task", "agent", "attempt", "job", "status", "reward", "flagged", "platform_fault", "price_cents", "runtime", "created_at"]
    search_fields = ["task__name", "agent", "error"]
    list_filter = ["status", "agent", "flagged", "platform_fault", "runtime"]
    list_select_related = ["task__version__task_set", "job"]
    raw_id_fields = ["task", "job", "deployment", "api_key"]
    # secret_values holds what its agent was given (its raw trace key, the deployment's key): never rendered.
    exclude = ["secret_values"]


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    """Jobs are started from the dashboard, the API or `bv`; staff may cancel one (its waiting trials are skipped,
    never charged). Money moved only through the ledger: the tally here is its running total."""

    list_display = ["__str__", "project", "purpose", "version", "status", "attempts", "charged_cents", "budget_cents", "created_at"]
    search_fields = ["name", "project__name", "version__task_set__name"]
    list_filter = ["purpose", "status", "runtime", "created_at"]
    list_select_related = ["project", "version__task_set"]
    raw_id_fields = ["version", "created_by"]
    actions = ["cancel_jobs"]

    @admin.action(description="Cancel the selected jobs (waiting trials skipped; any charged while waiting, refunded)")
    def cancel_jobs(self, request, queryset):
        skipped = sum(jobs.cancel(job) for job in queryset)
        self.message_user(request, f"{skipped} waiting trials skipped.")


@admin.register(TrialOutputs)
class TrialOutputsAdmin(ReadOnlyAdmin):
    list_display = ["trial", "digest", "size", "file_count", "created_at"]
    search_fields = ["digest"]
    raw_id_fields = ["trial"]
    exclude = ["archive"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("archive")


@admin.register(Regrade)
class RegradeAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "job", "version", "status", "charged_cents", "created_at"]
    list_filter = ["status", "created_at"]
    list_select_related = ["job", "version__task_set"]
    raw_id_fields = ["job", "version", "created_by"]
    actions = ["cancel_regrades"]

    @admin.action(description="Cancel the selected regrades (waiting grades skipped; any charged, refunded)")
    def cancel_regrades(self, request, queryset):
        skipped = sum(regrades.cancel(regrade) for regrade in queryset)
        self.message_user(request, f"{skipped} waiting grades skipped.")


@admin.register(Grade)
class GradeAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "regrade", "status", "reward", "platform_fault", "price_cents", "created_at"]
    list_filter = ["status", "platform_fault"]
    raw_id_fields = ["regrade", "trial", "task"]
