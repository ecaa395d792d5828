"""Every balance change goes through `post_entry`, one transaction each.

The account row is locked (`select_for_update`) before the balance is read,
so concurrent charges serialise on it; the ledger's unique (kind, reference)
makes a repeated charge, refund, redemption or credit a no-op.

Only a reversal (Stripe taking a top-up back) may leave the balance below
zero: that is a debt, which refuses runs and evals until a credit pays it.
"""

import logging
import secrets
import uuid
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone

from belvedir.core.money import dollars
from belvedir.sandbox.models import ComputeType

from .errors import CouponError, InsufficientBalance, ProjectHoldsMoney, TopUpError
from .models import Account, Coupon, CouponBatch, CouponRedemption, LedgerEntry, StripeEvent, TopUp, normalize_code

logger = logging.getLogger(__name__)

# No 0/O, 1/I/L, 2/Z, 5/S, 8/B: codes are read off paper and typed by people.
COUPON_ALPHABET = "ACDEFGHJKMNPQRTUVWXY34679"
COUPON_CODE_LENGTH = 12


def post_entry(account: Account, *, kind, amount_cents: int, reference: str, memo: str = "", user=None, topup: TopUp | None = None) -> tuple[LedgerEntry, bool]:
    """Append one ledger entry and move the cached balance with it.

    Returns (entry, created). A second post of the same (kind, reference)
    returns the first entry and changes nothing. A debit that would take the
    balance below zero raises InsufficientBalance, except a reversal (the
    money already left with Stripe: the account carries the debt).
    """
    with transaction.atomic():
        locked = Account.objects.select_for_update().get(pk=account.pk)
        existing = LedgerEntry.objects.filter(kind=kind, reference=reference).first()
        if existing:
            return existing, False
        new_balance = locked.balance_cents + amount_cents
        if new_balance < 0 and amount_cents < 0 and kind not in LedgerEntry.REVERSAL_KINDS:
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
                    topup=topup,
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


def refund_charge(reference: str, memo: str) -> tuple[LedgerEntry | None, bool]:
    """Give the charge posted under `reference` back, once: (the refund, whether this call posted it), or
    (None, False) when nothing was charged."""
    charge = LedgerEntry.objects.filter(kind=LedgerEntry.Kind.RUN_CHARGE, reference=reference).first()
    if charge is None:
        return None, False
    return post_entry(charge.account, kind=LedgerEntry.Kind.REFUND, amount_cents=-charge.amount_cents, reference=reference, memo=memo)


def refuse_if_in_debt(project):
    """Work that costs nothing per start (evals) still waits while the project owes money."""
    balance = Account.balance_for(project)
    if balance < 0:
        raise InsufficientBalance(balance, 0)


# The debt gate's register: every action through which a project spends money (a
# charge) or tokens (a deployment's or a judge's requests), by qualified name, with
# what it spends. Each refuses while its project is in debt before it spends, or,
# run by the queue, skips its work with the reason. tests/test_debt_gate.py proves
# each one and finds in the source every call that spends, so a new way to spend
# that bypasses a registered gate fails it.
DEBT_GATES: dict[str, str] = {}


def debt_gate(spends: str):
    """Register the decorated action as a gate of the debt gate (`spends` says what it would spend)."""

    def register(action):
        DEBT_GATES[f"{action.__module__}.{action.__qualname__}"] = spends
        return action

    return register


def detach_account(project, *, forfeit_cents: int = 0) -> Account | None:
    """Part of deleting a project: its account (ledger, top-ups, redemptions) stays, detached.

    Refused while the account is in debt (deleting the project must not
    escape it) and while its positive balance differs from `forfeit_cents`,
    the amount the person deleting was shown and accepts to lose: a credit
    that arrived after the page was drawn is never forfeited unseen.
    Nothing is deleted and no entry is posted: the kept balance is what the
    project held, so a later reversal of one of its top-ups still nets out.
    """
    account = Account.objects.select_for_update().filter(project=project).first()
    if account is None:
        return None
    if account.balance_cents < 0:
        raise ProjectHoldsMoney(
            f"This project owes {dollars(-account.balance_cents)} (a top-up was taken back after its credit was spent): "
            "pay the debt on Settings → Balance before deleting the project."
        )
    if account.balance_cents != max(forfeit_cents, 0):
        raise ProjectHoldsMoney(
            f"This project's balance is now {dollars(account.balance_cents)}, and deleting the project forfeits it: "
            "confirm again on the Members page, which shows the amount."
        )
    Account.objects.filter(pk=account.pk).update(project=None, project_name=project.name[:100], detached_at=timezone.now())
    return account


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
        raise TopUpError(f"The minimum is {dollars(minimum_cents)}.")
    if maximum_cents is not None and cents > maximum_cents:
        raise TopUpError(f"The maximum is {dollars(maximum_cents)}.")
    return cents


# -- Stripe top-ups ----------------------------------------------------------


def start_topup(account: Account, amount_cents: int, user, *, return_url_for) -> TopUp:
    """Create a Checkout Session for a top-up; the browser is sent to its URL.

    The TopUp row is committed first, and its id is the idempotency key, so a
    retried request never creates a second session for the same top-up.
    """
    from . import stripe_client  # here, not at the top: the stripe library takes ~0.4 s to import, paid only by a top-up

    if not stripe_client.configured():
        raise TopUpError("Top-ups are not configured on this server (STRIPE_SECRET_KEY is unset).")
    if not settings.TOPUP_MIN_CENTS <= amount_cents <= settings.TOPUP_MAX_CENTS:
        raise TopUpError(f"Top-ups are between {dollars(settings.TOPUP_MIN_CENTS)} and {dollars(settings.TOPUP_MAX_CENTS)}.")
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
REFUND_EVENTS = {"charge.refunded", "charge.updated"}
# A refund that did not reach the customer (Stripe: `failed`, or `canceled` before it was paid out).
REFUND_UPDATE_EVENTS = {"charge.refund.updated"}
UNPAID_REFUND_STATUSES = {"failed", "canceled"}
DISPUTE_EVENTS = {
    "charge.dispute.created",
    "charge.dispute.updated",
    "charge.dispute.funds_withdrawn",
    "charge.dispute.funds_reinstated",
    "charge.dispute.closed",
}


def handle_stripe_event(event: dict) -> str:
    """Record a verified webhook event once, and credit or take back a top-up once.

    Only a top-up this platform created is credited, and only for the amount
    and currency it recorded: a signature proves the event came from Stripe,
    not that the session was ours (anyone can create sessions on the same
    Stripe account with their own amount, currency and client_reference_id).
    Refunds and disputes are matched to a credited top-up by payment intent
    and checked the same way. Storing the event and posting its entry are
    one transaction, so a crash between them leaves neither and Stripe's
    retry posts.
    Returns what was done, for the response and the logs.
    """
    with transaction.atomic():
        try:
            with transaction.atomic():
                stored = StripeEvent.objects.create(event_id=event["id"], type=event["type"], payload=event)
        except IntegrityError:
            return "duplicate event"
        if event["type"] in CREDITING_EVENTS:
            outcome = _credit_topup(event["data"]["object"])
        elif event["type"] in REFUND_EVENTS:
            outcome = _take_back_refund(event["data"]["object"])
        elif event["type"] in REFUND_UPDATE_EVENTS:
            outcome = _give_back_failed_refund(event["data"]["object"])
        elif event["type"] in DISPUTE_EVENTS:
            outcome = _follow_dispute(event["data"]["object"])
        else:
            outcome = "ignored"
        StripeEvent.objects.filter(pk=stored.pk).update(outcome=outcome[:200])
    if outcome.startswith("refused"):
        logger.warning("Stripe event %s not applied: %s", event["id"], outcome)
    return outcome


def _id(value) -> str:
    """An expandable Stripe field: an id, or the expanded object carrying one."""
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) else ""


def _credit_topup(session: dict) -> str:
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
    entry, created = post_entry(
        topup.account,
        kind=LedgerEntry.Kind.TOPUP,
        amount_cents=topup.amount_cents,
        reference=topup.checkout_session_id,
        memo=f"Stripe top-up #{topup.pk}",
        user=topup.created_by,
        topup=topup,
    )
    # Refunds and disputes name the payment intent, never the session.
    intent = _id(session.get("payment_intent")) or topup.payment_intent_id
    TopUp.objects.filter(pk=topup.pk).update(status=TopUp.Status.PAID, payment_intent_id=intent or None)
    if not created:
        return "already credited"
    paid = entry.debt_paid_cents
    return f"credited; {dollars(paid)} of it paid the debt" if paid else "credited"


def _reversed_topup(obj: dict, what: str) -> tuple[TopUp | None, str]:
    """The credited top-up a charge or dispute is about, locked; or why there is none.

    The lock serialises every event about one top-up, so "taken back so
    far" is read and moved by one of them at a time.
    """
    intent = _id(obj.get("payment_intent"))
    topup = TopUp.objects.select_for_update().select_related("account").filter(payment_intent_id=intent).first() if intent else None
    if topup is None:
        return None, f"refused: no top-up of ours has this {what}'s payment intent"
    currency = str(obj.get("currency") or "").lower()
    if currency != settings.STRIPE_CURRENCY:
        return None, f"refused: {what} in {currency or 'no currency'}, not {settings.STRIPE_CURRENCY}"
    return topup, ""


def _taken_back(topup: TopUp, kinds=LedgerEntry.TOPUP_REVERSAL_KINDS) -> int:
    """Cents of the top-up's credit taken back so far by entries of `kinds` (a dispute won counts negative)."""
    return -(LedgerEntry.objects.filter(topup=topup, kind__in=kinds).aggregate(total=Sum("amount_cents"))["total"] or 0)


def _reverse(topup: TopUp, *, kind, amount_cents: int, reference: str, memo: str) -> bool:
    _, created = post_entry(topup.account, kind=kind, amount_cents=amount_cents, reference=reference, memo=memo, topup=topup)
    return created


def _take_back_refund(charge: dict) -> str:
    """`charge.refunded` or `charge.updated`: take back what the charge's refunds total, less what earlier events took.

    `amount_refunded` is cumulative, so two events that describe the same
    refunds (a retry with a new event id, the same state told twice) post
    once: the entry's reference is the total it brings the top-up to (and
    the failed refunds given back before it, so a total reached again after
    a failure is a new state). Refunds the charge lists as failed give their
    credit back first (once each, as `charge.refund.updated` does). An older
    event arriving late describes a smaller total and posts nothing: a total
    that went down is only believed with the failed refund that explains it.
    """
    topup, refused = _reversed_topup(charge, "charge")
    if topup is None:
        return refused
    amount, refunded = charge.get("amount"), charge.get("amount_refunded")
    if amount != topup.amount_cents:
        return f"refused: charge of {amount!r} cents where the top-up recorded {topup.amount_cents}"
    if not isinstance(refunded, int) or not 0 <= refunded <= amount:
        return f"refused: amount_refunded {refunded!r} is not between 0 and the charge's {amount}"
    given = [
        _give_back(topup, refund)
        for refund in (charge.get("refunds") or {}).get("data", [])
        if isinstance(refund, dict) and refund.get("status") in UNPAID_REFUND_STATUSES
    ]
    given = "; ".join(g for g in given if g.startswith("gave back"))
    so_far = _taken_back(topup, LedgerEntry.REFUND_KINDS)
    more = refunded - so_far
    if more <= 0:
        return (f"{given}; " if given else "") + f"already taken back ({dollars(so_far)} refunded so far)"
    if _taken_back(topup) + more > topup.amount_cents:
        return f"refused: taking back {more} more cents would exceed the top-up's {topup.amount_cents} (a dispute took part already)"
    refund_ids = ", ".join(_id(r) for r in (charge.get("refunds") or {}).get("data", []) if _id(r))
    _reverse(
        topup,
        kind=LedgerEntry.Kind.TOPUP_REFUND,
        amount_cents=-more,
        reference=f"{_id(charge) or topup.payment_intent_id}:refunded:{refunded}" + (f":after-failed:{failed}" if (failed := _given_back(topup)) else ""),
        memo=f"Stripe refunded top-up #{topup.pk}: {dollars(refunded)} of {dollars(amount)} so far" + (f" ({refund_ids})" if refund_ids else ""),
    )
    return (f"{given}; " if given else "") + f"took back {dollars(more)} (refunded so far {dollars(refunded)})"


def _given_back(topup: TopUp) -> int:
    """Cents of refunds' credit given back because the refund failed."""
    return LedgerEntry.objects.filter(topup=topup, kind=LedgerEntry.Kind.REFUND_FAILED).aggregate(total=Sum("amount_cents"))["total"] or 0


def _give_back_failed_refund(refund: dict) -> str:
    """`charge.refund.updated`: a refund that failed (or was cancelled) never reached the customer, so its credit comes back."""
    if refund.get("status") not in UNPAID_REFUND_STATUSES:
        return f"refund {refund.get('status') or 'unknown'}: nothing to post"
    topup, refused = _reversed_topup(refund, "refund")
    if topup is None:
        return refused
    return _give_back(topup, refund)


def _give_back(topup: TopUp, refund: dict) -> str:
    """Give back a failed refund's credit, once by its id whichever event tells it, and never more than refunds took.

    Called with the top-up locked (_reversed_topup), like every event about it.
    """
    refund_id, cents = _id(refund), refund.get("amount")
    if not refund_id or not isinstance(cents, int) or not 0 < cents <= topup.amount_cents:
        return f"refused: refund {refund_id or '?'} of {cents!r} cents for a top-up of {topup.amount_cents}"
    if str(refund.get("currency") or settings.STRIPE_CURRENCY).lower() != settings.STRIPE_CURRENCY:
        return f"refused: refund {refund_id} in {refund.get('currency')}, not {settings.STRIPE_CURRENCY}"
    reference = f"{refund_id}:failed"
    if LedgerEntry.objects.filter(kind=LedgerEntry.Kind.REFUND_FAILED, reference=reference).exists():
        return f"refund {refund_id} failed: already given back"
    # A failure told before its refund was taken back (or a refund never credited) gives back only what was taken.
    amount = min(cents, _taken_back(topup, LedgerEntry.REFUND_KINDS))
    if amount <= 0:
        return f"refund {refund_id} failed: nothing of it was taken back"
    _reverse(
        topup,
        kind=LedgerEntry.Kind.REFUND_FAILED,
        amount_cents=amount,
        reference=reference,
        memo=f"Stripe refund {refund_id} of top-up #{topup.pk} failed: {dollars(amount)} given back",
    )
    return f"gave back {dollars(amount)} (refund {refund_id} failed)"


def _follow_dispute(dispute: dict) -> str:
    """A dispute's balance transactions are what Stripe actually moved: post each once.

    A withdrawal (negative) takes the credit back; a reinstatement (positive,
    a dispute won) gives back what the dispute took. Keyed by the balance
    transaction's id, so any order and any number of events about the
    dispute post each movement once. A dispute with none (an inquiry, or not
    yet withdrawn) posts nothing.
    """
    topup, refused = _reversed_topup(dispute, "dispute")
    if topup is None:
        return refused
    disputed = dispute.get("amount")
    if not isinstance(disputed, int) or not 0 < disputed <= topup.amount_cents:
        return f"refused: disputed {disputed!r} cents of a top-up of {topup.amount_cents}"
    transactions = [t for t in dispute.get("balance_transactions") or [] if isinstance(t, dict)]
    done = []
    for txn in sorted(transactions, key=lambda t: (t.get("created") or 0, t.get("amount") or 0)):
        txn_id, moved = _id(txn), txn.get("amount")
        if not txn_id or not isinstance(moved, int) or moved == 0:
            continue
        if str(txn.get("currency") or "").lower() != settings.STRIPE_CURRENCY or abs(moved) > disputed:
            done.append(f"refused {txn_id}: {moved!r} {txn.get('currency')!r} for a dispute of {disputed}")
            continue
        if LedgerEntry.objects.filter(kind__in=[LedgerEntry.Kind.DISPUTE, LedgerEntry.Kind.DISPUTE_WON], reference=txn_id).exists():
            continue
        if moved < 0 and _taken_back(topup) - moved > topup.amount_cents:
            done.append(f"refused {txn_id}: would take back more than the top-up's {topup.amount_cents}")
            continue
        if moved < 0:
            kind, amount = LedgerEntry.Kind.DISPUTE, moved
            memo, note = f"Stripe dispute {_id(dispute)} withdrew {dollars(-moved)} of top-up #{topup.pk}", f"took back {dollars(-moved)}"
        else:
            # Give back no more than the dispute took (it may have been refused above).
            kind, amount = LedgerEntry.Kind.DISPUTE_WON, min(moved, _taken_back(topup, [LedgerEntry.Kind.DISPUTE, LedgerEntry.Kind.DISPUTE_WON]))
            if amount <= 0:
                continue
            memo = f"Stripe dispute {_id(dispute)} {dispute.get('status') or 'won'}: {dollars(amount)} of top-up #{topup.pk} reinstated"
            note = f"gave back {dollars(amount)}"
        _reverse(topup, kind=kind, amount_cents=amount, reference=txn_id, memo=memo)
        done.append(note)
    status = dispute.get("status") or "unknown"
    if not done:
        return f"dispute {status}: nothing to post"
    outcome = f"dispute {status}: " + "; ".join(done)
    return "refused: " + outcome if all(d.startswith("refused") for d in done) else outcome
