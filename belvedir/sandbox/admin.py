from django import forms
from django.contrib import admin, messages
from django.db.models import Count

from belvedir.core.masks import MaskWithoutSecret, unmasked

from . import health
from .models import EgressDestination, EgressGrant, SandboxHost, SandboxLease
from .output import MASK

TLS_FIELDS = ("tls_ca", "tls_cert", "tls_key")


class SandboxHostForm(forms.ModelForm):
    """TLS material is write-only: a stored value shows as the mask, and leaving the mask keeps it."""

    class Meta:
        model = SandboxHost
        fields = "__all__"  # noqa: DJ007  (the ModelAdmin's fieldsets choose what shows)
        widgets = {name: forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}) for name in TLS_FIELDS}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in TLS_FIELDS:
            if name in self.fields:
                self.initial[name] = MASK if getattr(self.instance, name) else ""

    def _clean_secret(self, name):
        stored = SandboxHost.objects.values_list(name, flat=True).get(pk=self.instance.pk) if self.instance.pk else None
        try:
            return unmasked(self.cleaned_data.get(name, "").strip(), stored)
        except MaskWithoutSecret as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_tls_ca(self):
        return self._clean_secret("tls_ca")

    def clean_tls_cert(self):
        return self._clean_secret("tls_cert")

    def clean_tls_key(self):
        return self._clean_secret("tls_key")

    def clean(self):
        data = super().clean()
        if bool(data.get("tls_cert")) != bool(data.get("tls_key")):
            raise forms.ValidationError("A TLS client certificate and its key go together: give both or neither.")
        return data


@admin.register(SandboxHost)
class SandboxHostAdmin(admin.ModelAdmin):
    form = SandboxHostForm
    list_display = [
        "name",
        "backend",
        "kind",
        "healthy",
        "runtime",
        "capacity",
        "in_use",
        "gpu_type",
        "gpu_count",
        "enabled",
        "draining",
        "last_checked_at",
        "last_error_short",
        "url",
    ]
    list_filter = ["healthy", "backend", "kind", "runtime", "enabled", "draining", "gpu_type"]
    list_editable = ["enabled", "capacity"]
    search_fields = ["name", "url"]
    actions = ["check_now", "drain", "undrain"]

    def get_readonly_fields(self, request, obj=None):
        # Draining is its own permission, not a side door through the change form.
        health = ["healthy", "last_checked_at", "last_error"]
        return health if self.has_drain_permission(request) else [*health, "draining"]

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

    @admin.display(description="Last error")
    def last_error_short(self, host):
        return host.last_error[:120]

    @admin.action(description="Check health now")
    def check_now(self, request, queryset):
        for host in queryset:
            if health.check_host(host):
                self.message_user(request, f"{host.name}: healthy.", messages.SUCCESS)
            else:
                self.message_user(request, f"{host.name}: unhealthy: {host.last_error}", messages.ERROR)


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
