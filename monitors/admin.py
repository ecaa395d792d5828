from django.contrib import admin

from .models import Alert, Delivery, Monitor, MonitorRun


@admin.register(Monitor)
class MonitorAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "suite_name", "deployment", "cron", "enabled", "next_run_at"]
    list_filter = ["enabled"]
    search_fields = ["name", "project__name", "suite_name"]
    raw_id_fields = ["project", "deployment", "judge", "baseline", "created_by"]
    # The signing secret is derived, never stored: nothing here to mask.
    readonly_fields = ["webhook_secret_version"]


@admin.register(MonitorRun)
class MonitorRunAdmin(admin.ModelAdmin):
    list_display = ["monitor", "due_at", "verdict", "suite_run", "baseline", "decided_at"]
    list_filter = ["verdict", "manual"]
    search_fields = ["monitor__name", "reason"]
    raw_id_fields = ["monitor", "suite_run", "baseline"]


class DeliveryInline(admin.TabularInline):
    model = Delivery
    extra = 0
    readonly_fields = ["event", "channel", "state", "attempts", "next_attempt_at", "last_error", "sent_at"]


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["title", "project", "kind", "state", "repeats", "opened_at", "resolved_at"]
    list_filter = ["kind", "state"]
    search_fields = ["title", "monitor__name", "project__name"]
    raw_id_fields = ["project", "monitor", "first_run", "last_run", "acknowledged_by"]
    inlines = [DeliveryInline]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["alert", "event", "channel", "state", "attempts", "next_attempt_at", "sent_at"]
    list_filter = ["channel", "state", "event"]
    search_fields = ["alert__title", "last_error"]
    raw_id_fields = ["alert"]
