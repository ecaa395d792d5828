"""Tie the top-ups credited before reversals existed to their credit and payment intent.

A refund or dispute names the payment intent, which only the stored
`checkout.session.completed` event recorded: without this, a top-up paid
before this release could never be taken back. This rewrites ledger rows
(setting `topup`), so it runs before 0006 installs the append-only guard.
"""

from django.db import migrations

CREDITING_EVENTS = ["checkout.session.completed", "checkout.session.async_payment_succeeded"]


def link(apps, schema_editor):
    TopUp = apps.get_model("billing", "TopUp")
    LedgerEntry = apps.get_model("billing", "LedgerEntry")
    StripeEvent = apps.get_model("billing", "StripeEvent")
    for topup in TopUp.objects.filter(status="paid").exclude(checkout_session_id=None).iterator():
        LedgerEntry.objects.filter(kind="topup", reference=topup.checkout_session_id, topup=None).update(topup=topup)
    for event in StripeEvent.objects.filter(type__in=CREDITING_EVENTS, outcome="credited").iterator():
        session = (event.payload.get("data") or {}).get("object") or {}
        intent = session.get("payment_intent")
        if isinstance(intent, dict):
            intent = intent.get("id")
        if intent and session.get("id") and not TopUp.objects.filter(payment_intent_id=intent).exists():
            TopUp.objects.filter(checkout_session_id=session["id"], payment_intent_id=None).update(payment_intent_id=intent)


class Migration(migrations.Migration):
    dependencies = [("billing", "0004_reversals_and_detached_accounts")]

    operations = [migrations.RunPython(link, migrations.RunPython.noop)]
