from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm

from belvedir.core.money import dollars

from .forms import project_balance_cents
from .models import ApiKey, Invitation, Membership, Project, ProjectSecret
from .usernames import validate_username
from .verification import is_verified


class UserCreation(AdminUserCreationForm):
    def clean_username(self):
        username = super().clean_username()
        validate_username(username)
        return username


class UserChange(UserChangeForm):
    def clean_username(self):
        username = self.cleaned_data["username"]
        # A name from before the rule may stay while other fields are edited; no new one may take the shape.
        if username != self.initial.get("username"):
            validate_username(username)
        return username


admin.site.unregister(get_user_model())


@admin.register(get_user_model())
class AccountAdmin(UserAdmin):
    """Django's user admin, holding usernames to the sign-up rule (belvedir.core.usernames)."""

    add_form = UserCreation
    form = UserChange
    list_display = [*UserAdmin.list_display, "email_verified"]
    list_select_related = ["verified_email"]
    readonly_fields = ["email_verified"]
    fieldsets = [*UserAdmin.fieldsets, ("Email", {"fields": ["email_verified"]})]

    @admin.display(description="Email verified", boolean=True)
    def email_verified(self, obj):
        return is_verified(obj)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "balance", "created_at"]
    list_select_related = ["account"]
    search_fields = ["name", "memberships__user__username"]
    list_filter = ["created_at"]
    readonly_fields = ["balance"]
    inlines = [MembershipInline]

    @admin.display(description="Balance")
    def balance(self, obj):
        return dollars(project_balance_cents(obj))


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__username", "project__name"]
    list_select_related = ["user", "project"]
    autocomplete_fields = ["user", "project"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "project", "user", "scope", "per_run", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["scope", "per_run", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "project__name", "user__username"]
    list_select_related = ["project", "user"]
    readonly_fields = ["prefix", "key_hash", "per_run", "created_at", "last_used_at", "revoked_at"]
    autocomplete_fields = ["project", "user"]
    actions = ["revoke"]

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        key, raw = ApiKey.issue(project=obj.project, user=obj.user, name=obj.name, scope=obj.scope)
        obj.pk = key.pk
        obj.refresh_from_db()
        # The only moment the raw key exists; the admin shows it once.
        messages.warning(request, f"New API key (copy it now, it is not stored): {raw}")

    def has_revoke_permission(self, request):
        return request.user.has_perm("core.revoke_apikey")

    @admin.action(description="Revoke selected keys", permissions=["revoke"])
    def revoke(self, request, queryset):
        for key in queryset.filter(revoked_at__isnull=True):
            key.revoke()
        self.message_user(request, "Revoked.")


@admin.register(ProjectSecret)
class ProjectSecretAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "updated_at"]
    search_fields = ["name", "project__name"]
    list_filter = ["updated_at"]
    exclude = ["value"]  # secret: never shown, not even to staff
    raw_id_fields = ["project"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["user", "email", "project", "invited_by", "state", "created_at", "expires_at"]
    search_fields = ["user__username", "user__email", "email", "project__name"]
    list_select_related = ["user", "project", "invited_by"]
    # The token is shown once to the inviting owner; admin sees only its hash.
    readonly_fields = ["token_hash", "created_at", "accepted_at", "declined_at"]
    autocomplete_fields = ["user", "project", "invited_by"]

    def has_add_permission(self, request):
        return False  # invitations are made by owners, who get the link
