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
    event_id, session_id, *, amount_total, client_reference_id, payment_status="paid", type="checkout.session.completed", currency="usd"
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
                }
            },
        }
    ).encode()
