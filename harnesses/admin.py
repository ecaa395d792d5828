from django.contrib import admin

from billing import workloads

from .actions import RUNS, cancel_run
from .forms import BaseEnvVarFormSet, EnvVarForm
from .models import Harness, HarnessEnvVar, Preset, Run


@admin.register(Preset)
class PresetAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "compute_type", "gpu_type", "needs_tasks", "local_model", "position"]
    list_filter = ["compute_type", "needs_tasks"]
    search_fields = ["name", "slug", "description"]
    list_editable = ["position"]


class EnvVarInline(admin.TabularInline):
    model = HarnessEnvVar
    # The dashboard's form and formset: the same name rules, duplicate check
    # and secret masking (staff never see a secret either).
    form = EnvVarForm
    formset = BaseEnvVarFormSet
    extra = 0


@admin.register(Harness)
class HarnessAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "compute_type", "repo_url", "preset", "created_at"]
    list_filter = ["compute_type", "local_model", "preset", "created_at"]
    search_fields = ["name", "repo_url", "project__name"]
    list_select_related = ["project", "preset"]
    raw_id_fields = ["project", "created_by"]
    inlines = [EnvVarInline]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "harness", "project", "status", "compute_type", "host", "score", "model_label", "price_cents", "created_at"]
    list_filter = ["status", "compute_type", "host", "created_at"]
    search_fields = ["=id", "harness__name", "project__name", "model_label", "commit_sha"]
    list_select_related = ["harness", "project", "host"]
    # secret_env holds HF tokens and signed URLs: never rendered, not even to staff.
    exclude = ["secret_env"]
    readonly_fields = [f.name for f in Run._meta.fields if f.name != "secret_env"]
    actions = ["cancel_runs", "refund_runs"]

    def has_add_permission(self, request):
        return False

    def has_refund_permission(self, request):
        return request.user.has_perm("harnesses.refund_run")

    def has_cancel_permission(self, request):
        return request.user.has_perm("harnesses.change_run")

    @admin.action(description="Cancel selected runs", permissions=["cancel"])
    def cancel_runs(self, request, queryset):
        cancelled = sum(cancel_run(run) for run in queryset.filter(status__in=Run.ACTIVE))
        self.message_user(request, f"Cancelled {cancelled} run(s).")

    @admin.action(description="Refund selected runs", permissions=["refund"])
    def refund_runs(self, request, queryset):
        refunded = sum(workloads.refund(RUNS, run, f"refunded by {request.user.username}") > 0 for run in queryset)
        self.message_user(request, f"Refunded {refunded} run(s) (each at most once).")
