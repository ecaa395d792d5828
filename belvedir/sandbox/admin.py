from django.contrib import admin
from django.db.models import Count

from .models import SandboxHost, SandboxLease


@admin.register(SandboxHost)
class SandboxHostAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "gpu_type", "gpu_count", "capacity", "in_use", "enabled", "draining", "docker_url"]
    list_filter = ["kind", "enabled", "draining", "gpu_type"]
    list_editable = ["enabled", "draining", "capacity"]
    search_fields = ["name", "docker_url"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(lease_count=Count("leases"))

    @admin.display(description="In use", ordering="lease_count")
    def in_use(self, host):
        return host.lease_count


@admin.register(SandboxLease)
class SandboxLeaseAdmin(admin.ModelAdmin):
    list_display = ["owner", "host", "gpu_slot", "acquired_at"]
    list_filter = ["host"]
    search_fields = ["owner"]
    list_select_related = ["host"]
