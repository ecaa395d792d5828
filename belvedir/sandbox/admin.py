from django.contrib import admin
from django.db.models import Count

from .models import SandboxHost, SandboxLease


@admin.register(SandboxHost)
class SandboxHostAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "gpu_type", "gpu_count", "capacity", "in_use", "enabled", "draining", "docker_url"]
    list_filter = ["kind", "enabled", "draining", "gpu_type"]
    list_editable = ["enabled", "capacity"]
    search_fields = ["name", "docker_url"]
    actions = ["drain", "undrain"]

    def get_readonly_fields(self, request, obj=None):
        # Draining is its own permission, not a side door through the change form.
        return [] if self.has_drain_permission(request) else ["draining"]

    def has_drain_permission(self, request):
        return request.user.has_perm("sandbox.drain_sandboxhost")

    @admin.action(description="Drain selected hosts (finish running sandboxes, take no new ones)", permissions=["drain"])
    def drain(self, request, queryset):
        self.message_user(request, f"Draining {queryset.update(draining=True)} host(s).")

    @admin.action(description="Stop draining selected hosts", permissions=["drain"])
    def undrain(self, request, queryset):
        self.message_user(request, f"{queryset.update(draining=False)} host(s) take new sandboxes again.")

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
