from django.contrib import admin

from .models import FineTunedModel


@admin.register(FineTunedModel)
class FineTunedModelAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "base_model", "adapter_size", "created_at"]
    search_fields = ["name", "base_model", "project__name"]
    list_filter = ["created_at"]
    list_select_related = ["project"]
    raw_id_fields = ["project", "created_by"]
