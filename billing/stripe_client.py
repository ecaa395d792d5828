"""The only module that imports `stripe`."""

from dataclasses import dataclass

import stripe
from django.conf import settings


class StripeUnavailable(Exception):
    pass


class InvalidWebhook(Exception):
    pass


@dataclass
class CheckoutSession:
    id: str
    url: str


def configured() -> bool:
    return bool(settings.STRIPE_SECRET_KEY)


def _client() -> stripe.StripeClient:
    base = {"api": settings.STRIPE_API_BASE} if settings.STRIPE_API_BASE else None
    return stripe.StripeClient(settings.STRIPE_SECRET_KEY, base_addresses=base, max_network_retries=2)


def create_checkout_session(*, amount_cents, client_reference_id, metadata, success_url, cancel_url, idempotency_key) -> CheckoutSession:
    params = {
        "mode": "payment",
        "client_reference_id": client_reference_id,
        "metadata": metadata,
        "success_url": success_url,
        "cancel_url": cancel_url,
        "line_items": [
            {
                "quantity": 1,
                "price_data": {
                    "currency": settings.STRIPE_CURRENCY,
                    "unit_amount": amount_cents,
                    "product_data": {"name": "Belvedir credit"},
                },
            }
        ],
    }
    try:
        session = _client().v1.checkout.sessions.create(params=params, options={"idempotency_key": idempotency_key})
    except stripe.StripeError as exc:
        raise StripeUnavailable(f"Stripe refused the payment session: {exc.user_message or exc}") from exc
    return CheckoutSession(id=session.id, url=session.url)


def parse_webhook(payload: bytes, signature: str) -> dict:
    """A verified event as a plain dict; InvalidWebhook for a bad, stale or missing signature."""
    if not settings.STRIPE_WEBHOOK_SECRET:
        raise InvalidWebhook("STRIPE_WEBHOOK_SECRET is not configured.")
    try:
        event = stripe.Webhook.construct_event(payload, signature, settings.STRIPE_WEBHOOK_SECRET)
    except (ValueError, stripe.SignatureVerificationError) as exc:
        raise InvalidWebhook(str(exc)) from exc
    return event.to_dict()
