"""Sign webhook payloads with Stripe's real scheme: t=<ts>,v1=HMAC-SHA256(secret, "<ts>.<payload>")."""

import hashlib
import hmac
import json
import time


def sign(payload: bytes, secret: str, timestamp: int | None = None) -> str:
    timestamp = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def checkout_event(
    event_id,
    session_id,
    *,
    amount_total,
    client_reference_id,
    payment_status="paid",
    type="checkout.session.completed",
    currency="usd",
    payment_intent=None,
) -> bytes:
    return json.dumps(
        {
            "id": event_id,
            "object": "event",
            "type": type,
            "data": {
                "object": {
                    "id": session_id,
                    "object": "checkout.session",
                    "amount_total": amount_total,
                    "currency": currency,
                    "client_reference_id": client_reference_id,
                    "payment_status": payment_status,
                    "payment_intent": payment_intent,
                }
            },
        }
    ).encode()


def _event(event_id, type, obj) -> bytes:
    return json.dumps({"id": event_id, "object": "event", "type": type, "data": {"object": obj}}).encode()


def refund_event(
    event_id, payment_intent, *, amount, amount_refunded, currency="usd", charge_id="ch_test_1", refunds=(), event_type="charge.refunded"
) -> bytes:
    """`charge.refunded` (or `charge.updated`): a Charge object, `amount_refunded` cumulative over its `refunds`
    (Stripe's shapes); a refund is (id, cents) or (id, cents, status), a failed one no longer in the total."""
    charge = {
        "id": charge_id,
        "object": "charge",
        "amount": amount,
        "amount_captured": amount,
        "amount_refunded": amount_refunded,
        "currency": currency,
        "paid": True,
        "payment_intent": payment_intent,
        "refunded": amount_refunded == amount,
        "refunds": {
            "object": "list",
            "data": [
                {"id": r[0], "object": "refund", "amount": r[1], "charge": charge_id, "currency": currency, "status": r[2] if len(r) > 2 else "succeeded"}
                for r in refunds
            ],
            "has_more": False,
        },
    }
    return _event(event_id, event_type, charge)


def refund_updated_event(event_id, payment_intent, refund_id, *, amount, status, currency="usd", charge_id="ch_test_1") -> bytes:
    """`charge.refund.updated`: a Refund object; `failed` when the money never reached the customer (Stripe's shape)."""
    refund = {
        "id": refund_id,
        "object": "refund",
        "amount": amount,
        "charge": charge_id,
        "currency": currency,
        "payment_intent": payment_intent,
        "status": status,
        "failure_reason": "expired_or_canceled_card" if status == "failed" else None,
    }
    return _event(event_id, "charge.refund.updated", refund)


def balance_transaction(txn_id, amount, *, currency="usd", created=0) -> dict:
    """A dispute's balance transaction: negative when Stripe withdraws the funds, positive when it reinstates them."""
    category = "dispute" if amount < 0 else "dispute_reversal"
    fee = 1500 if amount < 0 else -1500
    return {
        "id": txn_id,
        "object": "balance_transaction",
        "amount": amount,
        "currency": currency,
        "created": created,
        "fee": fee,
        "net": amount - fee,
        "reporting_category": category,
        "type": "adjustment",
    }


def dispute_event(
    event_id, type, payment_intent, *, amount, status, balance_transactions=(), currency="usd", dispute_id="dp_test_1", charge_id="ch_test_1"
) -> bytes:
    """`charge.dispute.*`: a Dispute object with its `status`, `amount` and `balance_transactions`."""
    dispute = {
        "id": dispute_id,
        "object": "dispute",
        "amount": amount,
        "currency": currency,
        "charge": charge_id,
        "payment_intent": payment_intent,
        "status": status,
        "reason": "fraudulent",
        "is_charge_refundable": False,
        "balance_transactions": list(balance_transactions),
    }
    return _event(event_id, type, dispute)
