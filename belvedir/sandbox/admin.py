from django.contrib import admin
from django.db.models import Count

from .models import EgressDestination, EgressGrant, SandboxHost, SandboxLease


@admin.register(SandboxHost)
class SandboxHostAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "runtime", "gpu_type", "gpu_count", "capacity", "in_use", "enabled", "draining", "docker_url"]
    list_filter = ["kind", "runtime", "enabled", "draining", "gpu_type"]
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


class EgressDestinationInline(admin.TabularInline):
    model = EgressDestination
    extra = 0
    can_delete = False
    readonly_fields = ["host", "port", "reason", "requests", "bytes_up", "bytes_down", "last_at"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(EgressGrant)
class EgressGrantAdmin(admin.ModelAdmin):
    """Read-only: grants are made and revoked by the worker, used by the proxy."""

    list_display = ["owner_kind", "owner_id", "bytes_up", "bytes_down", "max_bytes", "cap_reached_at", "created_at", "revoked_at"]
    list_filter = ["owner_kind"]
    search_fields = ["=owner_id"]
    exclude = ["token_hash"]
    readonly_fields = ["owner_kind", "owner_id", "domains", "max_bytes", "bytes_up", "bytes_down", "cap_reached_at", "created_at", "revoked_at"]
    inlines = [EgressDestinationInline]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
