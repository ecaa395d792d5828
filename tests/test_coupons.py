import csv
import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from billing.actions import COUPON_ALPHABET, redeem_coupon
from billing.errors import CouponError
from billing.models import Account, Coupon, CouponRedemption, LedgerEntry

from .concurrency import run_concurrently


@pytest.fixture
def coupon(db):
    return Coupon.objects.create(code="WELCOME10", amount_cents=1000, max_redemptions=5)


@pytest.mark.django_db
def test_it_credits_codes_ignoring_case_and_spaces(project, owner, coupon):
    entry = redeem_coupon(Account.for_project(project), "  welcome 10 ", owner)
    assert (entry.kind, entry.amount_cents) == ("coupon", 1000)
    assert Account.balance_for(project) == 1000
    coupon.refresh_from_db()
    assert coupon.redemption_count == 1


@pytest.mark.parametrize(
    "setup, code, message",
    [
        (lambda c: None, "NOPE", "Unknown coupon code NOPE"),
        (lambda c: Coupon.objects.filter(pk=c.pk).update(expires_at=timezone.now() - timedelta(days=1)), "WELCOME10", "expired"),
        (lambda c: Coupon.objects.filter(pk=c.pk).update(redemption_count=5), "WELCOME10", "fully used"),
        (lambda c: None, "", "Enter a coupon code"),
    ],
)
@pytest.mark.django_db
def test_it_refuses_with_a_specific_reason_and_changes_nothing(project, owner, coupon, setup, code, message):
    setup(coupon)
    with pytest.raises(CouponError, match=message):
        redeem_coupon(Account.for_project(project), code, owner)
    assert Account.balance_for(project) == 0
    assert not CouponRedemption.objects.exists()


@pytest.mark.django_db
def test_an_account_redeems_a_code_once(project, owner, coupon):
    account = Account.for_project(project)
    redeem_coupon(account, "WELCOME10", owner)
    with pytest.raises(CouponError, match="already redeemed"):
        redeem_coupon(account, "welcome10", owner)
    assert Account.balance_for(project) == 1000


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_redemptions_of_a_single_use_code(django_user_model):
    from belvedir.core.actions import create_account

    Coupon.objects.create(code="ONLYONE", amount_cents=500, max_redemptions=1)
    users = [create_account(username=f"u{i}", password=None) for i in range(50)]
    accounts = [Account.for_project(u.memberships.get().project) for u in users]
    results = run_concurrently(lambda i: redeem_coupon(accounts[i], "ONLYONE", users[i]), 50)
    assert sum(isinstance(r, LedgerEntry) for r in results) == 1
    assert sum(isinstance(r, CouponError) and "fully used" in str(r) for r in results) == 49
    assert Coupon.objects.get(code="ONLYONE").redemption_count == 1
    assert LedgerEntry.objects.filter(kind="coupon").count() == 1


@pytest.mark.django_db
def test_api_redeem_returns_credit_and_balance(api, coupon):
    response = api.post("/api/v1/coupons/redeem", {"code": "welcome10"}, format="json")
    assert response.status_code == 200
    assert response.json() == {"credited_cents": 1000, "balance_cents": 1000, "balance": "10.00"}
    again = api.post("/api/v1/coupons/redeem", {"code": "welcome10"}, format="json")
    assert again.status_code == 400 and "already redeemed" in again.json()["detail"]
    assert api.post("/api/v1/coupons/redeem", {}, format="json").status_code == 400


@pytest.mark.django_db
def test_attempts_are_throttled_per_user(api, owner_client, settings, held_rate_window):
    settings.COUPON_ATTEMPTS_PER_MINUTE = 3
    from django.core.cache import cache

    cache.clear()
    codes = [api.post("/api/v1/coupons/redeem", {"code": f"GUESS{i}"}, format="json").status_code for i in range(4)]
    assert codes == [400, 400, 400, 429]
    # The dashboard form shares the same budget.
    response = owner_client.post("/settings/balance/redeem/", {"code": "GUESS9"}, HTTP_HX_REQUEST="true")
    assert b"Too many attempts" in response.content


@pytest.mark.django_db
def test_dashboard_redeem_answers_inline_for_htmx(owner_client, coupon):
    from django.core.cache import cache

    cache.clear()
    response = owner_client.post("/settings/balance/redeem/", {"code": "welcome10"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert "Coupon applied: $10.00 added." in body
    assert 'hx-swap-oob="true"' in body and "$10.00" in body
    assert "<html" not in body


@pytest.mark.django_db
def test_dashboard_redeem_without_javascript_redirects_with_a_message(owner_client):
    from django.core.cache import cache

    cache.clear()
    response = owner_client.post("/settings/balance/redeem/", {"code": "BOGUS"}, follow=True)
    assert "Unknown coupon code BOGUS" in response.content.decode()


@pytest.mark.django_db
def test_create_coupons_command_prints_a_csv_batch():
    out, err = io.StringIO(), io.StringIO()
    call_command("create_coupons", "--amount", "10.00", "--count", "100", "--expires", "2027-01-31", stdout=out, stderr=err)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == 100 and len({r["code"] for r in rows}) == 100
    assert all(set(r["code"]) <= set(COUPON_ALPHABET) for r in rows)
    assert {r["amount_usd"] for r in rows} == {"10.00"}
    assert rows[0]["expires_at"].startswith("2027-01-31T23:59:59")
    assert Coupon.objects.count() == 100


@pytest.mark.parametrize(
    "args, message",
    [
        (["--amount", "-5"], "minimum"),
        (["--amount", "abc"], "not an amount"),
        (["--amount", "0"], "minimum"),
        (["--amount", "5", "--expires", "tomorrow"], "not a date"),
    ],
)
@pytest.mark.django_db
def test_create_coupons_refuses_bad_input(args, message):
    from django.core.management import CommandError

    with pytest.raises(CommandError, match=message):
        call_command("create_coupons", *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert not Coupon.objects.exists()


@pytest.mark.django_db
def test_admin_creates_a_batch_and_downloads_it_as_csv(owner):
    owner.is_staff = owner.is_superuser = True
    owner.save()
    client = Client()
    client.force_login(owner)
    response = client.post(
        "/admin/billing/couponbatch/add/",
        {"name": "launch", "count": "25", "amount_cents": "500", "max_redemptions": "1", "expires_at_0": "", "expires_at_1": ""},
    )
    assert response.status_code == 302, response.content
    from billing.models import CouponBatch

    batch = CouponBatch.objects.get()
    download = client.get(f"/admin/billing/couponbatch/{batch.pk}/csv/")
    rows = list(csv.DictReader(io.StringIO(download.content.decode())))
    assert len(rows) == 25 and download["Content-Type"] == "text/csv"


@pytest.mark.django_db
def test_htmx_redemption_also_refreshes_the_ledger(owner_client, coupon):
    # The defect: the balance updated in place but the Ledger kept saying
    # "No activity yet" until a reload.
    from django.core.cache import cache

    cache.clear()
    assert "No activity yet" in owner_client.get("/settings/balance/").content.decode()
    body = owner_client.post("/settings/balance/redeem/", {"code": "welcome10"}, HTTP_HX_REQUEST="true").content.decode()
    ledger = body[body.index('id="ledger"') - 100 :]
    assert 'hx-swap-oob="true"' in ledger[:200]
    assert "Coupon" in ledger and "$10.00" in ledger
    assert "No activity yet" not in body


@pytest.mark.django_db(transaction=True)
def test_a_multi_use_code_redeemed_at_once_by_more_accounts_than_it_allows_succeeds_exactly_its_limit():
    from belvedir.core.actions import create_account

    Coupon.objects.create(code="FIVEUSES", amount_cents=300, max_redemptions=5)
    users = [create_account(username=f"m{i}", password=None) for i in range(12)]
    accounts = [Account.for_project(u.memberships.get().project) for u in users]
    results = run_concurrently(lambda i: redeem_coupon(accounts[i], "FIVEUSES", users[i]), 12)
    winners = [i for i, r in enumerate(results) if isinstance(r, LedgerEntry)]
    assert len(winners) == 5, results
    assert sum(isinstance(r, CouponError) and "fully used" in str(r) for r in results) == 7
    assert Coupon.objects.get(code="FIVEUSES").redemption_count == 5
    assert CouponRedemption.objects.count() == 5 and LedgerEntry.objects.filter(kind="coupon").count() == 5
    assert [Account.objects.get(pk=accounts[i].pk).balance_cents for i in range(12)] == [300 if i in winners else 0 for i in range(12)]


@pytest.mark.django_db(transaction=True)
def test_one_account_redeeming_one_code_several_times_at_once_redeems_it_once(project, owner):
    Coupon.objects.create(code="ONCEEACH", amount_cents=700, max_redemptions=10)
    account = Account.for_project(project)
    results = run_concurrently(lambda i: redeem_coupon(account, "ONCEEACH", owner), 6)
    assert sum(isinstance(r, LedgerEntry) for r in results) == 1, results
    assert sum(isinstance(r, CouponError) and "already redeemed" in str(r) for r in results) == 5
    assert Account.balance_for(project) == 700
    assert Coupon.objects.get(code="ONCEEACH").redemption_count == 1 and CouponRedemption.objects.count() == 1
