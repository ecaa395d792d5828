import logging

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from belvedir.core.decorators import owner_required
from belvedir.core.htmx import polled
from belvedir.core.money import dollars
from belvedir.core.scoping import get_scoped_or_404
from belvedir.core.throttle import allow_coupon_attempt

from . import stripe_client
from .actions import handle_stripe_event, redeem_coupon, start_topup
from .errors import BillingError
from .forms import RedeemForm, TopUpForm
from .models import Account, LedgerEntry, TopUp

logger = logging.getLogger(__name__)


RECENT_TOPUPS = 20


def ledger_page(account, page=None):
    return Paginator(LedgerEntry.objects.filter(account=account).select_related("user", "topup"), 25).get_page(page)


def recent_topups(account):
    return list(TopUp.objects.filter(account=account).paid_with_reversals()[:RECENT_TOPUPS])


@login_required
@owner_required
def balance(request):
    return _balance_page(request)


def _balance_page(request, status=200):
    account = Account.for_project(request.project)
    entries = ledger_page(account, request.GET.get("page"))
    return render(
        request,
        "billing/balance.html",
        {
            "account": account,
            "entries": entries,
            "topups": recent_topups(account),
            "redeem_form": RedeemForm(),
            "topup_form": TopUpForm(),
            "presets": settings.TOPUP_PRESETS_CENTS,
            "stripe_configured": stripe_client.configured(),
            "prices": {"cpu": settings.RUN_PRICE_CPU_CENTS, "gpu": settings.RUN_PRICE_GPU_CENTS},
        },
        status=status,
    )


@login_required
@owner_required
@require_POST
def redeem(request):
    form = RedeemForm(request.POST)
    account = Account.for_project(request.project)
    ok, message = False, ""
    if not allow_coupon_attempt(request):
        message = "Too many attempts. Wait a minute and try again."
    elif not form.is_valid():
        message = "Enter a coupon code."
    else:
        try:
            entry = redeem_coupon(account, form.cleaned_data["code"], request.user)
            ok, message = True, f"Coupon applied: {dollars(entry.amount_cents)} added."
            if entry.debt_paid_cents:
                message += f" {dollars(entry.debt_paid_cents)} of it paid the debt."
            account.refresh_from_db()
        except BillingError as exc:
            message = str(exc)
    if request.htmx:
        # The ledger is swapped out of band too, so the new entry shows without a reload.
        context = {"ok": ok, "message": message, "account": account, "entries": ledger_page(account), "oob": True}
        return render(request, "billing/_redeem_result.html", context)
    messages.add_message(request, messages.SUCCESS if ok else messages.ERROR, message)
    return redirect("billing:balance")


@login_required
@owner_required
@require_POST
def topup(request):
    form = TopUpForm(request.POST)
    if not form.is_valid():
        # A bad amount is the request's fault: 400, with the page and the reason.
        messages.error(request, form.errors["amount"][0])
        return _balance_page(request, status=400)
    try:
        created = start_topup(
            Account.for_project(request.project),
            form.cleaned_data["amount"],
            request.user,
            return_url_for=lambda t: request.build_absolute_uri(reverse("billing:topup_status", args=[t.pk])),
        )
    except (BillingError, stripe_client.StripeUnavailable) as exc:
        messages.error(request, str(exc))
        return redirect("billing:balance")
    return redirect(created.checkout_url)


@login_required
@owner_required
def topup_status(request, pk):
    topup = get_scoped_or_404(request, TopUp.objects.for_user(request.user, request.project), pk=pk)
    credit = topup.entries.filter(kind=LedgerEntry.Kind.TOPUP).first()
    context = {"topup": topup, "account": topup.account, "credit": credit}
    if request.htmx:
        return polled(render(request, "billing/_topup_status.html", context), done=topup.status == TopUp.Status.PAID)
    return render(request, "billing/topup_status.html", context)


@csrf_exempt
@require_POST
def stripe_webhook(request):
    try:
        event = stripe_client.parse_webhook(request.body, request.headers.get("Stripe-Signature", ""))
    except stripe_client.InvalidWebhook as exc:
        logger.warning("rejected Stripe webhook: %s", exc)
        return HttpResponseBadRequest("Invalid signature.")
    outcome = handle_stripe_event(event)
    logger.info("Stripe event %s (%s): %s", event.get("id"), event.get("type"), outcome)
    return HttpResponse(outcome)
