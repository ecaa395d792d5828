import json
import time

import pytest
from django.test import Client

from billing.models import Account, LedgerEntry, StripeEvent, TopUp

from .concurrency import run_concurrently
from .fakes.stripe_server import FakeStripe
from .fakes.stripe_signing import checkout_event, sign

SECRET = "whsec_test_secret"


@pytest.fixture
def fake_stripe(settings):
    with FakeStripe() as fake:
        settings.STRIPE_SECRET_KEY = "sk_test_belvedir"
        settings.STRIPE_API_BASE = fake.url
        settings.STRIPE_WEBHOOK_SECRET = SECRET
        yield fake


@pytest.fixture
def webhook_secret(settings):
    settings.STRIPE_WEBHOOK_SECRET = SECRET


def recorded_topup(project, session_id, amount_cents) -> TopUp:
    """A top-up as start_topup leaves it once Stripe answered with `session_id`."""
    return TopUp.objects.create(account=Account.for_project(project), amount_cents=amount_cents, checkout_session_id=session_id)


def post_webhook(payload: bytes, signature: str | None):
    headers = {"HTTP_STRIPE_SIGNATURE": signature} if signature is not None else {}
    return Client().post("/billing/stripe/webhook", payload, content_type="application/json", **headers)


@pytest.mark.django_db
def test_add_funds_creates_a_checkout_session_and_redirects(owner_client, project, fake_stripe):
    response = owner_client.post("/settings/balance/topup/", {"amount": "25"})
    topup = TopUp.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"https://checkout.stripe.test/pay/{topup.checkout_session_id}"
    sent = fake_stripe.requests[-1]
    form = sent["form"]
    assert form["mode"] == "payment"
    assert form["line_items[0][price_data][unit_amount]"] == "2500"
    assert form["line_items[0][price_data][currency]"] == "usd"
    assert form["client_reference_id"] == str(Account.for_project(project).pk)
    assert sent["headers"]["Idempotency-Key"] == f"belvedir-topup-{topup.pk}"
    assert sent["headers"]["Authorization"] == "Bearer sk_test_belvedir"
    assert form["success_url"].endswith(f"/settings/balance/topups/{topup.pk}/")


@pytest.mark.parametrize(
    "amount, message",
    [
        ("-10", "minimum"),
        ("0", "minimum"),
        ("ten", "not an amount"),
        ("1000.01", "maximum"),
        ("4.99", "minimum"),
        ("10.001", "two decimals"),
        ("1e999999", "not an amount"),
        ("1e-999999", "two decimals"),
        ("NaN", "not an amount"),
        ("Infinity", "not an amount"),
    ],
)
@pytest.mark.django_db
def test_bad_top_up_amounts_are_refused_with_a_message(owner_client, fake_stripe, amount, message):
    response = owner_client.post("/settings/balance/topup/", {"amount": amount})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not TopUp.objects.exists()
    assert fake_stripe.requests == []


@pytest.mark.django_db
def test_the_return_page_waits_then_shows_the_credit(owner_client, project, fake_stripe):
    owner_client.post("/settings/balance/topup/", {"amount": "10"})
    topup = TopUp.objects.get()
    url = f"/settings/balance/topups/{topup.pk}/"
    assert "Payment pending" in owner_client.get(url).content.decode()
    pending_poll = owner_client.get(url, HTTP_HX_REQUEST="true")
    assert pending_poll.status_code == 200
    payload = checkout_event("evt_1", topup.checkout_session_id, amount_total=1000, client_reference_id=str(topup.account_id))
    assert post_webhook(payload, sign(payload, SECRET)).status_code == 200
    done = owner_client.get(url, HTTP_HX_REQUEST="true")
    assert done.status_code == 286  # tells htmx to stop polling
    assert "Payment received" in done.content.decode() and "$10.00" in done.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_same_event_delivered_five_times_concurrently_credits_once(project, webhook_secret):
    account = recorded_topup(project, "cs_test_dup", 2500).account
    payload = checkout_event("evt_dup", "cs_test_dup", amount_total=2500, client_reference_id=str(account.pk))
    signature = sign(payload, SECRET)
    results = run_concurrently(lambda i: post_webhook(payload, signature).status_code, 5)
    assert results == [200] * 5
    assert Account.balance_for(project) == 2500
    assert LedgerEntry.objects.filter(kind="topup").count() == 1
    assert StripeEvent.objects.count() == 1


@pytest.mark.django_db
def test_completed_and_async_succeeded_for_one_session_credit_once(project, webhook_secret):
    account = recorded_topup(project, "cs_test_x", 1000).account
    for event_id, kind in [("evt_a", "checkout.session.completed"), ("evt_b", "checkout.session.async_payment_succeeded")]:
        payload = checkout_event(event_id, "cs_test_x", amount_total=1000, client_reference_id=str(account.pk), type=kind)
        assert post_webhook(payload, sign(payload, SECRET)).status_code == 200
    assert Account.balance_for(project) == 1000


@pytest.mark.django_db
def test_unpaid_sessions_are_not_credited_until_paid(project, webhook_secret):
    account = recorded_topup(project, "cs_test_async", 1000).account
    unpaid = checkout_event("evt_u", "cs_test_async", amount_total=1000, client_reference_id=str(account.pk), payment_status="unpaid")
    assert post_webhook(unpaid, sign(unpaid, SECRET)).status_code == 200
    assert Account.balance_for(project) == 0
    paid = checkout_event("evt_p", "cs_test_async", amount_total=1000, client_reference_id=str(account.pk), type="checkout.session.async_payment_succeeded")
    post_webhook(paid, sign(paid, SECRET))
    assert Account.balance_for(project) == 1000


@pytest.mark.django_db
def test_ignored_event_types_get_200_and_are_recorded(webhook_secret):
    payload = json.dumps({"id": "evt_i", "object": "event", "type": "customer.created", "data": {"object": {}}}).encode()
    response = post_webhook(payload, sign(payload, SECRET))
    assert response.status_code == 200 and response.content == b"ignored"
    assert StripeEvent.objects.filter(event_id="evt_i").exists()


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda p: (p, sign(p, "whsec_forged")), id="forged"),
        pytest.param(lambda p: (p, sign(p, SECRET, timestamp=int(time.time()) - 3600)), id="stale"),
        pytest.param(lambda p: (p.replace(b"1000", b"9999"), sign(p, SECRET)), id="altered-after-signing"),
        pytest.param(lambda p: (p, None), id="missing"),
        pytest.param(lambda p: (p, "garbage"), id="malformed"),
    ],
)
@pytest.mark.django_db
def test_bad_signatures_are_rejected_and_store_nothing(project, webhook_secret, tamper):
    account = recorded_topup(project, "cs_bad", 1000).account
    payload, signature = tamper(checkout_event("evt_bad", "cs_bad", amount_total=1000, client_reference_id=str(account.pk)))
    assert post_webhook(payload, signature).status_code == 400
    assert not StripeEvent.objects.exists()
    assert Account.balance_for(project) == 0


@pytest.mark.django_db
def test_a_paid_session_the_platform_never_created_is_stored_without_credit(project, webhook_secret):
    # The reproduced attack: a session made on the same Stripe account by
    # someone else, naming a victim's account in client_reference_id.
    account = Account.for_project(project)
    payload = checkout_event("evt_foreign", "cs_not_ours", amount_total=100_000, client_reference_id=str(account.pk), currency="jpy")
    response = post_webhook(payload, sign(payload, SECRET))
    assert response.status_code == 200
    assert Account.balance_for(project) == 0
    assert not LedgerEntry.objects.exists()
    assert StripeEvent.objects.get(event_id="evt_foreign").outcome.startswith("refused: no top-up")


@pytest.mark.parametrize(
    "currency, amount_total, reason",
    [("jpy", 1000, "paid in jpy"), ("usd", 100_000, "where the top-up recorded 1000"), ("usd", 999, "where the top-up recorded 1000")],
)
@pytest.mark.django_db
def test_a_top_up_paid_in_another_currency_or_amount_is_not_credited(project, webhook_secret, currency, amount_total, reason):
    topup = recorded_topup(project, "cs_ours", 1000)
    payload = checkout_event("evt_odd", "cs_ours", amount_total=amount_total, client_reference_id=str(topup.account_id), currency=currency)
    assert post_webhook(payload, sign(payload, SECRET)).status_code == 200
    assert Account.balance_for(project) == 0
    assert reason in StripeEvent.objects.get(event_id="evt_odd").outcome
    topup.refresh_from_db()
    assert topup.status == TopUp.Status.PENDING


@pytest.mark.django_db
def test_a_crash_between_storing_the_event_and_crediting_lets_the_retry_credit(project, webhook_secret, monkeypatch):
    from billing import actions

    topup = recorded_topup(project, "cs_crash", 1000)
    payload = checkout_event("evt_crash", "cs_crash", amount_total=1000, client_reference_id=str(topup.account_id))
    real_post_entry = actions.post_entry

    def crash_once(*args, **kwargs):
        monkeypatch.setattr(actions, "post_entry", real_post_entry)
        raise ConnectionError("worker lost mid-credit")

    monkeypatch.setattr(actions, "post_entry", crash_once)
    with pytest.raises(ConnectionError):
        post_webhook(payload, sign(payload, SECRET))
    assert not StripeEvent.objects.exists()  # stored with the credit or not at all
    retry = post_webhook(payload, sign(payload, SECRET))
    assert retry.content == b"credited"
    assert Account.balance_for(project) == 1000
