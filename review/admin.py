from django.contrib import admin

from .models import Item, Label, Queue, RubricVersion


class RubricInline(admin.TabularInline):
    model = RubricVersion
    extra = 0
    # A rubric version is what labels were made under: kept as it was.
    readonly_fields = ["number", "scores", "instructions", "created_by", "created_at"]


@admin.register(Queue)
class QueueAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "overlap", "blind", "judge_key", "target_width", "stopped_at", "created_at"]
    list_filter = ["blind"]
    search_fields = ["name", "project__name", "judge_key"]
    raw_id_fields = ["project", "dataset", "created_by"]
    inlines = [RubricInline]


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ["pk", "queue", "kind", "object_id", "step", "stratum", "labels_done", "done", "held_by", "held_until"]
    list_filter = ["kind", "done", "stratum"]
    search_fields = ["queue__name"]
    raw_id_fields = ["queue", "held_by"]
    list_select_related = ["queue", "held_by"]


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["item", "reviewer", "rubric", "skipped", "seconds", "created_at"]
    list_filter = ["skipped"]
    search_fields = ["item__queue__name", "reviewer__username"]
    raw_id_fields = ["item", "reviewer", "rubric"]
    list_select_related = ["item", "reviewer", "rubric"]
