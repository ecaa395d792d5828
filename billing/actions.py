"""Every balance change goes through `post_entry`, one transaction each.

The account row is locked (`select_for_update`) before the balance is read,
so concurrent charges serialise on it; the ledger's unique (kind, reference)
makes a repeated charge, refund, redemption or credit a no-op.
"""

import logging
import secrets
import uuid
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from belvedir.sandbox.models import ComputeType

from .errors import CouponError, InsufficientBalance, TopUpError
from .models import Account, Coupon, CouponBatch, CouponRedemption, LedgerEntry, TopUp, normalize_code

logger = logging.getLogger(__name__)

# No 0/O, 1/I/L, 2/Z, 5/S, 8/B: codes are read off paper and typed by people.
COUPON_ALPHABET = "ACDEFGHJKMNPQRTUVWXY34679"
COUPON_CODE_LENGTH = 12


def post_entry(account: Account, *, kind, amount_cents: int, reference: str, memo: str = "", user=None) -> tuple[LedgerEntry, bool]:
    """Append one ledger entry and move the cached balance with it.

    Returns (entry, created). A second post of the same (kind, reference)
    returns the first entry and changes nothing.
    """
    with transaction.atomic():
        locked = Account.objects.select_for_update().get(pk=account.pk)
        existing = LedgerEntry.objects.filter(kind=kind, reference=reference).first()
        if existing:
            return existing, False
        new_balance = locked.balance_cents + amount_cents
        if new_balance < 0:
            raise InsufficientBalance(locked.balance_cents, -amount_cents)
        try:
            with transaction.atomic():
                entry = LedgerEntry.objects.create(
                    account=locked,
                    kind=kind,
                    amount_cents=amount_cents,
                    balance_after_cents=new_balance,
                    reference=reference,
                    memo=memo[:500],
                    user=user,
                )
        except IntegrityError:
            # The same reference on another account's lock won the race.
            return LedgerEntry.objects.get(kind=kind, reference=reference), False
        Account.objects.filter(pk=locked.pk).update(balance_cents=F("balance_cents") + amount_cents)
    account.balance_cents = new_balance
    return entry, True


# -- runs ------------------------------------------------------------------


def run_price_cents(compute_type: str) -> int:
    return settings.RUN_PRICE_GPU_CENTS if compute_type == ComputeType.GPU else settings.RUN_PRICE_CPU_CENTS


def run_reference(run) -> str:
    """What the ledger names a run by: its charge and its refund share it, so each happens once.

    Not the run's sandbox owner (`Run.owner`), though it reads the same: this
    one is stored in the append-only ledger and must never change.
    """
    return f"run:{run.pk}"


def charge_for_run(run) -> LedgerEntry:
    """Charge a run's price before it is queued; InsufficientBalance otherwise."""
    price = run.price_cents
    entry, _ = post_entry(
        Account.for_project(run.project),
        kind=LedgerEntry.Kind.RUN_CHARGE,
        amount_cents=-price,
        reference=run_reference(run),
        memo=f"Run #{run.pk} ({run.compute_type.upper()})",
        user=run.created_by,
    )
    return entry


def refund_run(run, reason: str) -> LedgerEntry | None:
    """Give a run's charge back, once. None when the run was never charged."""
    charge = LedgerEntry.objects.filter(kind=LedgerEntry.Kind.RUN_CHARGE, reference=run_reference(run)).first()
    if charge is None:
        return None
    entry, _ = post_entry(
        charge.account,
        kind=LedgerEntry.Kind.REFUND,
        amount_cents=-charge.amount_cents,
        reference=run_reference(run),
        memo=f"Refund for run #{run.pk}: {reason}",
    )
    return entry


def grant_credit(account: Account, amount_cents: int, memo: str, user) -> LedgerEntry:
    """A staff adjustment (positive or negative) with a memo saying why."""
    if not memo.strip():
        raise ValueError("An adjustment needs a memo.")
    entry, _ = post_entry(account, kind=LedgerEntry.Kind.ADJUSTMENT, amount_cents=amount_cents, reference=f"adjustment:{uuid.uuid4()}", memo=memo, user=user)
    return entry


# -- coupons ---------------------------------------------------------------


def redeem_coupon(account: Account, code: str, user) -> LedgerEntry:
    code = normalize_code(code)
    if not code:
        raise CouponError("Enter a coupon code.")
    with transaction.atomic():
        # Locking the coupon row serialises redemptions of one code, so its
        # total limit holds however many people redeem it at once.
        coupon = Coupon.objects.select_for_update().filter(code=code).first()
        if coupon is None:
            raise CouponError(f"Unknown coupon code {code}.")
        if coupon.expires_at and coupon.expires_at <= timezone.now():
            raise CouponError(f"Coupon {code} expired on {coupon.expires_at:%Y-%m-%d}.")
        if CouponRedemption.objects.filter(coupon=coupon, account=account).exists():
            raise CouponError(f"Coupon {code} was already redeemed for this project.")
        if coupon.redemption_count >= coupon.max_redemptions:
            raise CouponError(f"Coupon {code} has been fully used.")
        redemption = CouponRedemption.objects.create(coupon=coupon, account=account, user=user)
        Coupon.objects.filter(pk=coupon.pk).update(redemption_count=F("redemption_count") + 1)
        entry, _ = post_entry(
            account,
            kind=LedgerEntry.Kind.COUPON,
            amount_cents=coupon.amount_cents,
            reference=f"redemption:{redemption.pk}",
            memo=f"Coupon {code}",
            user=user,
        )
    return entry


def generate_code() -> str:
    return "".join(secrets.choice(COUPON_ALPHABET) for _ in range(COUPON_CODE_LENGTH))


def create_coupon_batch(*, name, count, amount_cents, expires_at=None, max_redemptions=1, user=None) -> CouponBatch:
    if count < 1 or count > 100_000:
        raise ValueError("A batch holds 1 to 100,000 codes.")
    if amount_cents <= 0:
        raise ValueError("A coupon's amount must be positive.")
    with transaction.atomic():
        batch = CouponBatch.objects.create(
            name=name, count=count, amount_cents=amount_cents, expires_at=expires_at, max_redemptions=max_redemptions, created_by=user
        )
        codes: set[str] = set()
        while len(codes) < count:
            codes.add(generate_code())
        Coupon.objects.bulk_create(
            Coupon(code=code, amount_cents=amount_cents, expires_at=expires_at, max_redemptions=max_redemptions, batch=batch, created_by=user) for code in codes
        )
    return batch


# -- money input -----------------------------------------------------------


def parse_dollars(raw, *, minimum_cents: int = 1, maximum_cents: int | None = None) -> int:
    """'25', '25.5' or '25.50' dollars to cents, with a message a person understands."""
    try:
        value = Decimal(str(raw).strip().lstrip("$"))
    except (InvalidOperation, ValueError):
        raise TopUpError(f"{raw!r} is not an amount in dollars.") from None
    # Huge exponents (1e999999) are finite Decimals that quantize cannot
    # represent: refuse anything past a trillion dollars before touching it.
    if not value.is_finite() or value.adjusted() > 12:
        raise TopUpError(f"{str(raw)[:40]!r} is not an amount in dollars.")
    try:
        whole_cents = value == value.quantize(Decimal("0.01"))
    except InvalidOperation:
        whole_cents = False
    if not whole_cents:
        raise TopUpError("Amounts are in dollars with at most two decimals.")
    cents = int(value * 100)
    if cents < minimum_cents:
        raise TopUpError(f"The minimum is ${minimum_cents / 100:.2f}.")
    if maximum_cents is not None and cents > maximum_cents:
        raise TopUpError(f"The maximum is ${maximum_cents / 100:,.2f}.")
    return cents


# -- Stripe top-ups ----------------------------------------------------------


def start_topup(account: Account, amount_cents: int, user, *, return_url_for) -> TopUp:
    """Create a Checkout Session for a top-up; the browser is sent to its URL.

    The TopUp row is committed first, and its id is the idempotency key, so a
    retried request never creates a second session for the same top-up.
    """
    from . import stripe_client

    if not stripe_client.configured():
        raise TopUpError("Top-ups are not configured on this server (STRIPE_SECRET_KEY is unset).")
    if not settings.TOPUP_MIN_CENTS <= amount_cents <= settings.TOPUP_MAX_CENTS:
        raise TopUpError(f"Top-ups are between ${settings.TOPUP_MIN_CENTS / 100:.2f} and ${settings.TOPUP_MAX_CENTS / 100:,.2f}.")
    topup = TopUp.objects.create(account=account, amount_cents=amount_cents, created_by=user)
    session = stripe_client.create_checkout_session(
        amount_cents=amount_cents,
        client_reference_id=str(account.pk),
        metadata={"topup_id": str(topup.pk), "account_id": str(account.pk)},
        success_url=return_url_for(topup),
        cancel_url=return_url_for(topup),
        idempotency_key=f"belvedir-topup-{topup.pk}",
    )
    TopUp.objects.filter(pk=topup.pk).update(checkout_session_id=session.id, checkout_url=session.url)
    topup.checkout_session_id, topup.checkout_url = session.id, session.url
    return topup


CREDITING_EVENTS = {"checkout.session.completed", "checkout.session.async_payment_succeeded"}


def handle_stripe_event(event: dict) -> str:
    """Record a verified webhook event once and credit a paid Checkout Session once.

    Only a top-up this platform created is credited, and only for the amount
    and currency it recorded: a signature proves the event came from Stripe,
    not that the session was ours (anyone can create sessions on the same
    Stripe account with their own amount, currency and client_reference_id).
    Storing the event and crediting it are one transaction, so a crash
    between them leaves neither and Stripe's retry credits.
    Returns what was done, for the response and the logs.
    """
    from .models import StripeEvent

    with transaction.atomic():
        try:
            with transaction.atomic():
                stored = StripeEvent.objects.create(event_id=event["id"], type=event["type"], payload=event)
        except IntegrityError:
            return "duplicate event"
        outcome = _credit_topup(event)
        StripeEvent.objects.filter(pk=stored.pk).update(outcome=outcome)
    if outcome.startswith("refused"):
        logger.warning("Stripe event %s not credited: %s", event["id"], outcome)
    return outcome


def _credit_topup(event: dict) -> str:
    if event["type"] not in CREDITING_EVENTS:
        return "ignored"
    session = event["data"]["object"]
    if session.get("payment_status") != "paid":
        return "not paid yet"
    session_id = session.get("id")
    topup = TopUp.objects.select_for_update().select_related("account").filter(checkout_session_id=session_id).first() if session_id else None
    if topup is None:
        return "refused: no top-up of ours has this checkout session"
    currency, amount = str(session.get("currency") or "").lower(), session.get("amount_total")
    if currency != settings.STRIPE_CURRENCY:
        return f"refused: paid in {currency or 'no currency'}, not {settings.STRIPE_CURRENCY}"
    if amount != topup.amount_cents:
        return f"refused: paid {amount!r} cents where the top-up recorded {topup.amount_cents}"
    _, created = post_entry(
        topup.account,
        kind=LedgerEntry.Kind.TOPUP,
        amount_cents=topup.amount_cents,
        reference=topup.checkout_session_id,
        memo="Stripe top-up",
        user=topup.created_by,
    )
    TopUp.objects.filter(pk=topup.pk).update(status=TopUp.Status.PAID)
    return "credited" if created else "already credited"
