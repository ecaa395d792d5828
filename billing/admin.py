from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import Q, Sum
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.html import format_html

from belvedir.core.money import dollars

from .actions import create_coupon_batch, grant_credit
from .exports import write_coupons_csv
from .forms import GrantCreditForm
from .models import Account, Coupon, CouponBatch, CouponRedemption, LedgerEntry, StripeEvent, TopUp


class ReadOnlyAdmin(admin.ModelAdmin):
    """Append-only records: visible, never added, changed or deleted by hand."""

    # The read-only view still builds a form: a top-up's checkout URL field
    # would warn that Django 6 changes its default scheme.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class DetachedFilter(admin.SimpleListFilter):
    title = "project"
    parameter_name = "detached"

    def lookups(self, request, model_admin):
        return [("no", "Exists"), ("yes", "Deleted (account kept)")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(project__isnull=self.value() == "yes")
        return queryset


class InDebtFilter(admin.SimpleListFilter):
    title = "debt"
    parameter_name = "in_debt"

    def lookups(self, request, model_admin):
        return [("yes", "In debt")]

    def queryset(self, request, queryset):
        return queryset.filter(balance_cents__lt=0) if self.value() == "yes" else queryset


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    list_display = ["__str__", "project", "project_name", "balance", "detached_at", "created_at"]
    search_fields = ["project__name", "project_name", "project__memberships__user__username"]
    list_filter = [DetachedFilter, InDebtFilter, "created_at"]
    list_select_related = ["project"]
    readonly_fields = ["project", "project_name", "detached_at", "balance_cents", "created_at"]
    actions = ["grant_credit_action"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="Balance", ordering="balance_cents")
    def balance(self, account):
        return dollars(account.balance_cents)

    def has_grant_credit_permission(self, request):
        return request.user.has_perm("billing.grant_credit")

    @admin.action(description="Grant credit (an adjustment with a memo)", permissions=["grant_credit"])
    def grant_credit_action(self, request, queryset):
        form = GrantCreditForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            for account in queryset:
                grant_credit(account, form.cleaned_data["amount"], form.cleaned_data["memo"], request.user)
            self.message_user(request, f"Adjusted {queryset.count()} account(s) by {dollars(form.cleaned_data['amount'])}.")
            return None
        return render(
            request,
            "admin/billing/grant_credit.html",
            {**self.admin_site.each_context(request), "form": form, "accounts": queryset, "opts": self.model._meta},
        )


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "account", "kind", "amount", "balance_after", "topup", "reference", "memo", "user"]
    list_filter = ["kind", "created_at"]
    search_fields = ["reference", "memo", "account__project__name", "account__project_name", "user__username"]
    list_select_related = ["account__project", "user", "topup"]

    @admin.display(description="Amount", ordering="amount_cents")
    def amount(self, entry):
        return dollars(entry.amount_cents)

    @admin.display(description="Balance after")
    def balance_after(self, entry):
        return dollars(entry.balance_after_cents)


@admin.register(Coupon)
class CouponAdmin(admin.ModelAdmin):
    list_display = ["code", "amount", "redemption_count", "max_redemptions", "expires_at", "batch", "created_at"]
    list_filter = ["expires_at", "batch", "created_at"]
    search_fields = ["code", "batch__name"]
    readonly_fields = ["redemption_count", "created_by", "created_at"]
    list_select_related = ["batch"]

    @admin.display(description="Amount", ordering="amount_cents")
    def amount(self, coupon):
        return dollars(coupon.amount_cents)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


class CouponBatchForm(forms.ModelForm):
    class Meta:
        model = CouponBatch
        fields = ["name", "count", "amount_cents", "expires_at", "max_redemptions"]
        help_texts = {"amount_cents": "Per code, in cents (1000 = $10.00).", "max_redemptions": "Per code."}


@admin.register(CouponBatch)
class CouponBatchAdmin(admin.ModelAdmin):
    form = CouponBatchForm
    list_display = ["name", "count", "amount", "expires_at", "max_redemptions", "created_at", "download"]
    list_filter = ["created_at", "expires_at"]
    search_fields = ["name"]

    def get_readonly_fields(self, request, obj=None):
        return ["name", "count", "amount_cents", "expires_at", "max_redemptions"] if obj else []

    @admin.display(description="Amount")
    def amount(self, batch):
        return dollars(batch.amount_cents)

    @admin.display(description="Codes")
    def download(self, batch):
        return format_html('<a href="{}">Download CSV</a>', reverse("admin:billing_couponbatch_csv", args=[batch.pk]))

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        batch = create_coupon_batch(
            name=obj.name,
            count=obj.count,
            amount_cents=obj.amount_cents,
            expires_at=obj.expires_at,
            max_redemptions=obj.max_redemptions,
            user=request.user,
        )
        obj.pk = batch.pk
        messages.info(
            request, format_html('{} codes created. <a href="{}">Download CSV</a>', batch.count, reverse("admin:billing_couponbatch_csv", args=[batch.pk]))
        )

    def get_urls(self):
        return [path("<int:pk>/csv/", self.admin_site.admin_view(self.csv_view), name="billing_couponbatch_csv")] + super().get_urls()

    def csv_view(self, request, pk):
        # The codes are money: only staff who may see coupons get them.
        if not request.user.has_perm("billing.view_coupon"):
            raise PermissionDenied
        batch = get_object_or_404(CouponBatch, pk=pk)
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="coupons-{batch.pk}.csv"'
        write_coupons_csv(response, batch.coupons.order_by("code"))
        return response


@admin.register(CouponRedemption)
class CouponRedemptionAdmin(ReadOnlyAdmin):
    list_display = ["coupon", "account", "user", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["coupon__code", "account__project__name", "user__username"]
    list_select_related = ["coupon", "account__project", "user"]


class TopUpEntryInline(admin.TabularInline):
    """The top-up's credit and each reversal (refund, dispute, dispute won) beside it."""

    model = LedgerEntry
    fields = ["created_at", "kind", "amount_cents", "balance_after_cents", "reference", "memo"]
    readonly_fields = fields
    ordering = ["created_at", "pk"]
    extra = 0
    can_delete = False
    verbose_name_plural = "ledger entries (credit and reversals)"

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(TopUp)
class TopUpAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "account", "amount", "status", "taken_back", "checkout_session_id", "payment_intent_id", "created_by"]
    list_filter = ["status", "created_at"]
    search_fields = ["checkout_session_id", "payment_intent_id", "account__project__name", "account__project_name"]
    list_select_related = ["account__project", "created_by"]
    inlines = [TopUpEntryInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(reversed_cents=Sum("entries__amount_cents", filter=Q(entries__kind__in=LedgerEntry.TOPUP_REVERSAL_KINDS)))

    @admin.display(description="Amount")
    def amount(self, topup):
        return dollars(topup.amount_cents)

    @admin.display(description="Taken back")
    def taken_back(self, topup):
        return dollars(-topup.reversed_cents) if topup.reversed_cents else "—"


@admin.register(StripeEvent)
class StripeEventAdmin(ReadOnlyAdmin):
    list_display = ["event_id", "type", "outcome", "received_at"]
    list_filter = ["type", "received_at"]
    search_fields = ["event_id"]
