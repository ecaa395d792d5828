"""Chargebacks: a refunded or disputed top-up takes its credit back, once; a dispute won gives it back; debt refuses work."""

import threading

import pytest
from django.db import transaction
from django.db.models import Sum

from billing.actions import post_entry
from billing.models import Account, LedgerEntry, StripeEvent, TopUp

from .concurrency import lock_waiters, run_concurrently, start_thread
from .fakes.stripe_signing import balance_transaction, checkout_event, dispute_event, refund_event, refund_updated_event, sign
from .harness_fixtures import wait_for
from .test_stripe import SECRET, post_webhook, recorded_topup, webhook_secret  # noqa: F401  (webhook_secret: a fixture)

pytestmark = pytest.mark.usefixtures("webhook_secret")


def deliver(payload: bytes) -> str:
    response = post_webhook(payload, sign(payload, SECRET))
    assert response.status_code == 200, response.content
    return response.content.decode()


def credited_topup(project, amount_cents=1000, intent="pi_test_1", session="cs_test_1") -> TopUp:
    """A top-up paid through the webhook, as Stripe tells it: the session names its payment intent."""
    topup = recorded_topup(project, session, amount_cents)
    assert deliver(
        checkout_event(f"evt_paid_{session}", session, amount_total=amount_cents, client_reference_id=str(topup.account_id), payment_intent=intent)
    ).startswith("credited")
    topup.refresh_from_db()
    assert topup.payment_intent_id == intent
    return topup


def spend(project, cents):
    post_entry(Account.for_project(project), kind="run_charge", amount_cents=-cents, reference=f"run:spent-{cents}", memo="a run")


def reversals(topup):
    return [(e.kind, e.amount_cents) for e in topup.reversals()]


@pytest.mark.django_db
def test_a_full_refund_takes_the_whole_credit_back_tied_to_its_top_up(project):
    topup = credited_topup(project, 1000)
    outcome = deliver(refund_event("evt_r1", "pi_test_1", amount=1000, amount_refunded=1000, refunds=[("re_1", 1000)]))
    assert outcome == "took back $10.00 (refunded so far $10.00)"
    assert Account.balance_for(project) == 0
    assert reversals(topup) == [("topup_refund", -1000)]
    assert "re_1" in topup.reversals().get().memo


@pytest.mark.django_db
def test_partial_refunds_take_back_what_each_adds_to_the_total(project):
    topup = credited_topup(project, 1000)
    deliver(refund_event("evt_r1", "pi_test_1", amount=1000, amount_refunded=300, refunds=[("re_1", 300)]))
    assert Account.balance_for(project) == 700
    deliver(refund_event("evt_r2", "pi_test_1", amount=1000, amount_refunded=1000, refunds=[("re_2", 700), ("re_1", 300)]))
    assert Account.balance_for(project) == 0
    assert reversals(topup) == [("topup_refund", -300), ("topup_refund", -700)]


@pytest.mark.django_db
def test_two_events_telling_the_same_refunds_take_back_once_and_a_late_older_one_nothing(project):
    topup = credited_topup(project, 1000)
    deliver(refund_event("evt_a", "pi_test_1", amount=1000, amount_refunded=600))
    assert deliver(refund_event("evt_b", "pi_test_1", amount=1000, amount_refunded=600)) == "already taken back ($6.00 refunded so far)"
    # An event of when only $2.00 was refunded, delivered after the $6.00 one.
    assert deliver(refund_event("evt_old", "pi_test_1", amount=1000, amount_refunded=200)).startswith("already taken back")
    assert reversals(topup) == [("topup_refund", -600)]
    assert Account.balance_for(project) == 400


@pytest.mark.django_db
def test_a_lost_dispute_takes_the_credit_back_when_stripe_withdraws_the_funds(project):
    topup = credited_topup(project, 1000)
    withdrawn = [balance_transaction("txn_w", -1000)]
    assert (
        deliver(dispute_event("evt_d1", "charge.dispute.created", "pi_test_1", amount=1000, status="needs_response"))
        == "dispute needs_response: nothing to post"
    )
    assert Account.balance_for(project) == 1000
    deliver(dispute_event("evt_d2", "charge.dispute.funds_withdrawn", "pi_test_1", amount=1000, status="needs_response", balance_transactions=withdrawn))
    assert Account.balance_for(project) == 0
    deliver(dispute_event("evt_d3", "charge.dispute.closed", "pi_test_1", amount=1000, status="lost", balance_transactions=withdrawn))
    assert reversals(topup) == [("dispute", -1000)]
    assert Account.balance_for(project) == 0


@pytest.mark.django_db
def test_a_dispute_won_gives_the_credit_back(project):
    topup = credited_topup(project, 1000)
    withdrawn = [balance_transaction("txn_w", -1000, created=1)]
    both = [*withdrawn, balance_transaction("txn_r", 1000, created=2)]
    deliver(dispute_event("evt_d1", "charge.dispute.funds_withdrawn", "pi_test_1", amount=1000, status="under_review", balance_transactions=withdrawn))
    assert Account.balance_for(project) == 0
    assert deliver(dispute_event("evt_d2", "charge.dispute.funds_reinstated", "pi_test_1", amount=1000, status="won", balance_transactions=both)) == (
        "dispute won: gave back $10.00"
    )
    deliver(dispute_event("evt_d3", "charge.dispute.closed", "pi_test_1", amount=1000, status="won", balance_transactions=both))
    assert reversals(topup) == [("dispute", -1000), ("dispute_won", 1000)]
    assert Account.balance_for(project) == 1000


@pytest.mark.django_db(transaction=True)
def test_one_refund_event_delivered_five_times_at_once_posts_one_entry(project):
    topup = credited_topup(project, 2500)
    payload = refund_event("evt_dup", "pi_test_1", amount=2500, amount_refunded=2500)
    signature = sign(payload, SECRET)
    assert run_concurrently(lambda i: post_webhook(payload, signature).status_code, 5) == [200] * 5
    assert reversals(topup) == [("topup_refund", -2500)]
    assert Account.balance_for(project) == 0
    assert StripeEvent.objects.filter(type="charge.refunded").count() == 1


@pytest.mark.django_db(transaction=True)
def test_five_different_events_of_one_dispute_at_once_post_it_once(project):
    topup = credited_topup(project, 2500)
    withdrawn = [balance_transaction("txn_w", -2500)]
    payloads = [
        dispute_event(f"evt_d{i}", "charge.dispute.funds_withdrawn", "pi_test_1", amount=2500, status="needs_response", balance_transactions=withdrawn)
        for i in range(5)
    ]
    signed = [(p, sign(p, SECRET)) for p in payloads]
    assert run_concurrently(lambda i: post_webhook(*signed[i]).status_code, 5) == [200] * 5
    assert reversals(topup) == [("dispute", -2500)]
    assert Account.balance_for(project) == 0


@pytest.mark.parametrize(
    "payload, reason",
    [
        (refund_event("evt_x", "pi_not_ours", amount=1000, amount_refunded=1000), "no top-up of ours has this charge's payment intent"),
        (refund_event("evt_x", "pi_test_1", amount=1000, amount_refunded=1000, currency="eur"), "charge in eur, not usd"),
        (refund_event("evt_x", "pi_test_1", amount=5000, amount_refunded=5000), "charge of 5000 cents where the top-up recorded 1000"),
        (refund_event("evt_x", "pi_test_1", amount=1000, amount_refunded=1001), "not between 0 and the charge's 1000"),
        (
            dispute_event(
                "evt_x", "charge.dispute.funds_withdrawn", "pi_not_ours", amount=1000, status="lost", balance_transactions=[balance_transaction("t", -1000)]
            ),
            "no top-up of ours has this dispute's payment intent",
        ),
        (
            dispute_event(
                "evt_x", "charge.dispute.funds_withdrawn", "pi_test_1", amount=9000, status="lost", balance_transactions=[balance_transaction("t", -9000)]
            ),
            "disputed 9000 cents of a top-up of 1000",
        ),
    ],
)
@pytest.mark.django_db
def test_a_reversal_naming_no_top_up_of_ours_or_other_money_is_stored_and_refused(project, payload, reason):
    credited_topup(project, 1000)
    outcome = deliver(payload)
    assert outcome.startswith("refused") and reason in outcome
    assert StripeEvent.objects.get(event_id="evt_x").outcome == outcome
    assert Account.balance_for(project) == 1000
    assert not LedgerEntry.objects.filter(kind__in=LedgerEntry.TOPUP_REVERSAL_KINDS).exists()


@pytest.mark.django_db
def test_refund_and_dispute_together_never_take_back_more_than_the_top_up(project):
    topup = credited_topup(project, 1000)
    deliver(refund_event("evt_r", "pi_test_1", amount=1000, amount_refunded=1000))
    outcome = deliver(
        dispute_event(
            "evt_d", "charge.dispute.funds_withdrawn", "pi_test_1", amount=1000, status="lost", balance_transactions=[balance_transaction("t", -1000)]
        )
    )
    assert outcome.startswith("refused") and "more than the top-up's 1000" in outcome
    assert reversals(topup) == [("topup_refund", -1000)]


@pytest.mark.django_db
def test_a_refund_after_the_credit_was_spent_is_a_debt_that_refuses_runs_with_402(project, owner, api, owner_client):
    from harnesses.models import Harness, Run

    credited_topup(project, 1000)
    spend(project, 700)
    deliver(refund_event("evt_r", "pi_test_1", amount=1000, amount_refunded=1000))
    assert Account.balance_for(project) == -700
    harness = Harness.objects.create(
        project=project, created_by=owner, name="h", repo_url="https://example.com/r.git", install_command="true", run_command="true"
    )
    response = api.post(f"/api/v1/harnesses/{harness.pk}/runs")
    assert response.status_code == 402
    body = response.json()
    assert "owes $7.00" in body["detail"] and body["debt_cents"] == 700 and body["balance_cents"] == -700
    page = owner_client.post(f"/harnesses/{harness.pk}/runs/")
    assert page.status_code == 402 and "owes $7.00" in page.content.decode()
    assert not Run.objects.exists() and Account.balance_for(project) == -700


@pytest.mark.django_db
def test_a_project_in_debt_cannot_start_or_resume_an_eval(project, api, owner_client):
    from evals.models import Deployment, Eval

    credited_topup(project, 1000)
    spend(project, 250)
    deliver(
        dispute_event(
            "evt_d", "charge.dispute.funds_withdrawn", "pi_test_1", amount=1000, status="needs_response", balance_transactions=[balance_transaction("t", -1000)]
        )
    )
    Deployment.objects.create(project=project, name="d", base_url="http://127.0.0.1:9", model="m")
    response = api.post("/api/v1/evals", {"benchmark": "gsm8k", "deployment": "d", "sample_limit": 1}, format="json")
    assert response.status_code == 402 and "owes $2.50" in response.json()["detail"] and response.json()["debt_cents"] == 250
    assert not Eval.objects.exists()
    page = owner_client.post("/evals/new/benchmark/", {"benchmark": "gsm8k", "deployment": Deployment.objects.get().pk, "sample_limit": "1"})
    assert page.status_code == 402 and "owes $2.50" in page.content.decode() and not Eval.objects.exists()
    failed = Eval.objects.create(project=project, deployment=Deployment.objects.get(), benchmark="gsm8k", seed=1, status="failed")
    resumed = api.post(f"/api/v1/evals/{failed.pk}/resume", {}, format="json")
    assert resumed.status_code == 402 and "owes $2.50" in resumed.json()["detail"]
    assert Eval.objects.get().status == "failed"


@pytest.mark.django_db
def test_the_next_credit_pays_the_debt_first_and_the_pages_say_so(project, owner_client):
    from django.core.cache import cache

    from billing.models import Coupon

    credited_topup(project, 1000)
    spend(project, 1000)
    deliver(refund_event("evt_r", "pi_test_1", amount=1000, amount_refunded=400))
    page = owner_client.get("/settings/balance/").content.decode()
    assert "−$4.00" in page and "owes $4.00" in page and "pays the debt first" in page

    cache.clear()
    Coupon.objects.create(code="HELLO", amount_cents=500)
    body = owner_client.post("/settings/balance/redeem/", {"code": "hello"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Coupon applied: $5.00 added. $4.00 of it paid the debt." in body
    assert Account.balance_for(project) == 100

    spend(project, 100)
    deliver(refund_event("evt_r2", "pi_test_1", amount=1000, amount_refunded=1000))
    assert Account.balance_for(project) == -600
    second = credited_topup(project, 2000, intent="pi_test_2", session="cs_test_2")
    assert StripeEvent.objects.get(event_id="evt_paid_cs_test_2").outcome == "credited; $6.00 of it paid the debt"
    status_page = owner_client.get(f"/settings/balance/topups/{second.pk}/").content.decode()
    assert "$20.00 was added. $6.00 of it paid the debt." in status_page and "$14.00" in status_page
    assert Account.balance_for(project) == 1400
    assert "owes" not in owner_client.get("/settings/balance/").content.decode()


@pytest.mark.django_db
def test_the_balance_page_and_api_show_each_reversal_beside_its_top_up(project, api, owner_client):
    first = credited_topup(project, 1000)
    second = credited_topup(project, 2500, intent="pi_test_2", session="cs_test_2")
    deliver(refund_event("evt_r", "pi_test_1", amount=1000, amount_refunded=300))
    deliver(
        dispute_event(
            "evt_d", "charge.dispute.funds_withdrawn", "pi_test_2", amount=2500, status="needs_response", balance_transactions=[balance_transaction("t", -2500)]
        )
    )

    topups = {t["id"]: t for t in api.get("/api/v1/balance").json()["topups"]}
    assert [(r["kind"], r["amount_cents"]) for r in topups[first.pk]["reversals"]] == [("topup_refund", -300)]
    assert [(r["kind"], r["amount_cents"]) for r in topups[second.pk]["reversals"]] == [("dispute", -2500)]
    entries = api.get("/api/v1/balance").json()["entries"]
    assert {(e["kind"], e["topup"]) for e in entries} >= {("topup_refund", first.pk), ("dispute", second.pk)}

    page = owner_client.get("/settings/balance/").content.decode()
    row = page[page.index(f'id="topup-{first.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "$10.00" in row and "Top-up refunded" in row and "−$3.00" in row and "Top-up disputed" not in row
    row2 = page[page.index(f'id="topup-{second.pk}"') :]
    assert "Top-up disputed" in row2[: row2.index("</tr>")]


@pytest.mark.django_db
def test_the_admin_shows_reversals_beside_the_top_up(project, staff_client):
    topup = credited_topup(project, 1000)
    deliver(refund_event("evt_r", "pi_test_1", amount=1000, amount_refunded=250))
    listing = staff_client.get("/admin/billing/topup/").content.decode()
    assert "$2.50" in listing and "pi_test_1" in listing
    detail = staff_client.get(f"/admin/billing/topup/{topup.pk}/change/").content.decode()
    assert "Top-up refunded" in detail and "-250" in detail and "ch_test_1:refunded:250" in detail


# -- a refund that failed gives its credit back ----------------------------------------------------------------


@pytest.mark.django_db
def test_a_failed_refund_told_by_charge_refund_updated_gives_the_credit_back_once(project):
    topup = credited_topup(project, 1000)
    spend(project, 800)
    deliver(refund_event("evt_r", "pi_test_1", amount=1000, amount_refunded=1000, refunds=[("re_1", 1000)]))
    assert Account.balance_for(project) == -800
    failed = refund_updated_event("evt_f", "pi_test_1", "re_1", amount=1000, status="failed")
    assert deliver(failed) == "gave back $10.00 (refund re_1 failed)"
    assert deliver(failed) == "duplicate event"
    # The same failure told again under another event id, then by the charge that now lists it failed.
    assert deliver(refund_updated_event("evt_f2", "pi_test_1", "re_1", amount=1000, status="failed")) == "refund re_1 failed: already given back"
    charge = refund_event("evt_c", "pi_test_1", amount=1000, amount_refunded=0, refunds=[("re_1", 1000, "failed")], event_type="charge.updated")
    assert deliver(charge) == "already taken back ($0.00 refunded so far)"
    assert reversals(topup) == [("topup_refund", -1000), ("refund_failed", 1000)]
    assert Account.balance_for(project) == 200


@pytest.mark.django_db
def test_a_charge_listing_its_refund_failed_gives_the_credit_back_once_in_either_event(project):
    topup = credited_topup(project, 1000)
    deliver(refund_event("evt_r", "pi_test_1", amount=1000, amount_refunded=400, refunds=[("re_1", 400)]))
    down = [("re_1", 400, "failed")]
    assert deliver(refund_event("evt_u", "pi_test_1", amount=1000, amount_refunded=0, refunds=down, event_type="charge.updated")).startswith(
        "gave back $4.00 (refund re_1 failed)"
    )
    assert deliver(refund_event("evt_u2", "pi_test_1", amount=1000, amount_refunded=0, refunds=down)).startswith("already taken back")
    assert deliver(refund_updated_event("evt_f", "pi_test_1", "re_1", amount=400, status="failed")) == "refund re_1 failed: already given back"
    assert reversals(topup) == [("topup_refund", -400), ("refund_failed", 400)]
    assert Account.balance_for(project) == 1000
    # A new refund bringing the total back to $4.00 is a new refund, taken back (not the first one's state again).
    again = refund_event("evt_r2", "pi_test_1", amount=1000, amount_refunded=400, refunds=[("re_2", 400), ("re_1", 400, "failed")])
    assert deliver(again).endswith("took back $4.00 (refunded so far $4.00)")
    assert Account.balance_for(project) == 600


@pytest.mark.django_db
def test_a_total_that_went_down_without_a_failed_refund_is_an_older_event_and_posts_nothing(project):
    topup = credited_topup(project, 1000)
    deliver(refund_event("evt_r", "pi_test_1", amount=1000, amount_refunded=600, refunds=[("re_1", 600)]))
    assert deliver(refund_event("evt_old", "pi_test_1", amount=1000, amount_refunded=0, event_type="charge.updated")).startswith("already taken back")
    assert reversals(topup) == [("topup_refund", -600)]


@pytest.mark.django_db
def test_a_refund_that_succeeded_or_failed_in_another_currency_gives_nothing_back(project):
    topup = credited_topup(project, 1000)
    deliver(refund_event("evt_r", "pi_test_1", amount=1000, amount_refunded=1000, refunds=[("re_1", 1000)]))
    assert deliver(refund_updated_event("evt_s", "pi_test_1", "re_1", amount=1000, status="succeeded")) == "refund succeeded: nothing to post"
    assert deliver(refund_updated_event("evt_e", "pi_test_1", "re_1", amount=1000, status="failed", currency="eur")).startswith("refused")
    assert reversals(topup) == [("topup_refund", -1000)] and Account.balance_for(project) == 0


@pytest.mark.django_db(transaction=True)
def test_one_failed_refund_told_five_times_at_once_gives_back_once(project):
    topup = credited_topup(project, 2500)
    deliver(refund_event("evt_r", "pi_test_1", amount=2500, amount_refunded=2500, refunds=[("re_1", 2500)]))
    payloads = [refund_updated_event(f"evt_f{i}", "pi_test_1", "re_1", amount=2500, status="failed") for i in range(4)]
    payloads.append(refund_event("evt_c", "pi_test_1", amount=2500, amount_refunded=0, refunds=[("re_1", 2500, "failed")], event_type="charge.updated"))
    assert run_concurrently(lambda i: post_webhook(payloads[i], sign(payloads[i], SECRET)).status_code, 5) == [200] * 5
    assert reversals(topup) == [("topup_refund", -2500), ("refund_failed", 2500)]
    assert Account.balance_for(project) == 2500


# -- a refund racing a dispute, and disputes told in other orders ----------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_refund_and_a_dispute_of_one_top_up_processed_at_once_take_back_no_more_than_it(project):
    """Both events are held at the same point (the account's lock, taken by a third connection) until both wait,
    so without the top-up's lock each would read "nothing taken back yet" and both post: $12.00 of a $10.00 top-up."""
    topup = credited_topup(project, 1000)
    refund = refund_event("evt_r", "pi_test_1", amount=1000, amount_refunded=600, refunds=[("re_1", 600)])
    dispute = dispute_event(
        "evt_d", "charge.dispute.funds_withdrawn", "pi_test_1", amount=600, status="needs_response", balance_transactions=[balance_transaction("txn_w", -600)]
    )
    held, release = threading.Event(), threading.Event()

    def hold_the_account():
        with transaction.atomic():
            Account.objects.select_for_update().get(pk=topup.account_id)
            held.set()
            release.wait(60)

    holder = start_thread(hold_the_account)
    try:
        assert held.wait(30)
        events = [start_thread(post_webhook, payload, sign(payload, SECRET)) for payload in (refund, dispute)]
        wait_for(lambda: lock_waiters() >= 2, timeout=30)
    finally:
        release.set()
    holder.join(30)
    for thread in events:
        thread.join(60)
    outcomes = [thread.result.content.decode() for thread in events]
    refused = [o for o in outcomes if o.startswith("refused")]
    assert len(refused) == 1 and ("more than the top-up's 1000" in refused[0] or "exceed the top-up's 1000" in refused[0]), outcomes
    assert len(reversals(topup)) == 1 and reversals(topup)[0][1] == -600
    assert Account.balance_for(project) == 400
    assert Account.objects.get(pk=topup.account_id).entries.aggregate(total=Sum("amount_cents"))["total"] == 400


@pytest.mark.django_db
def test_only_the_closing_event_of_a_lost_dispute_takes_the_credit_back_and_a_late_earlier_one_nothing(project):
    topup = credited_topup(project, 1000)
    withdrawn = [balance_transaction("txn_w", -1000)]
    # `created` and `funds_withdrawn` were lost: the closing event carries the withdrawal.
    closed = dispute_event("evt_d3", "charge.dispute.closed", "pi_test_1", amount=1000, status="lost", balance_transactions=withdrawn)
    assert deliver(closed) == "dispute lost: took back $10.00"
    late = dispute_event("evt_d2", "charge.dispute.funds_withdrawn", "pi_test_1", amount=1000, status="needs_response", balance_transactions=withdrawn)
    assert deliver(late) == "dispute needs_response: nothing to post"
    assert reversals(topup) == [("dispute", -1000)] and Account.balance_for(project) == 0


@pytest.mark.django_db
def test_only_the_closing_event_of_a_won_dispute_nets_to_nothing_whatever_order_it_lists_and_what_comes_late(project):
    topup = credited_topup(project, 1000)
    withdrawn, reinstated = balance_transaction("txn_w", -1000, created=1), balance_transaction("txn_r", 1000, created=2)
    # Listed reinstatement first: the movements are applied in the order Stripe made them (created), not as listed.
    closed = dispute_event("evt_d3", "charge.dispute.closed", "pi_test_1", amount=1000, status="won", balance_transactions=[reinstated, withdrawn])
    assert deliver(closed) == "dispute won: took back $10.00; gave back $10.00"
    assert Account.balance_for(project) == 1000
    # The earlier events, delivered after it, tell movements already posted.
    for event_id, kind in (("evt_d1", "charge.dispute.created"), ("evt_d2", "charge.dispute.funds_withdrawn")):
        late = dispute_event(
            event_id, kind, "pi_test_1", amount=1000, status="needs_response", balance_transactions=[withdrawn] if event_id == "evt_d2" else []
        )
        assert deliver(late) == "dispute needs_response: nothing to post"
    assert reversals(topup) == [("dispute", -1000), ("dispute_won", 1000)] and Account.balance_for(project) == 1000


@pytest.mark.django_db
def test_a_partial_dispute_takes_back_only_what_it_withdrew_and_a_withdrawal_past_the_disputed_amount_is_refused(project):
    topup = credited_topup(project, 1000)
    partial = [balance_transaction("txn_w", -400, created=1)]
    assert deliver(
        dispute_event("evt_d1", "charge.dispute.funds_withdrawn", "pi_test_1", amount=400, status="needs_response", balance_transactions=partial)
    ) == ("dispute needs_response: took back $4.00")
    assert Account.balance_for(project) == 600
    too_much = dispute_event(
        "evt_d2", "charge.dispute.funds_withdrawn", "pi_test_1", amount=400, status="needs_response", balance_transactions=[balance_transaction("txn_x", -1000)]
    )
    assert deliver(too_much) == "refused: dispute needs_response: refused txn_x: -1000 'usd' for a dispute of 400"
    won = [*partial, balance_transaction("txn_r", 400, created=2)]
    assert deliver(dispute_event("evt_d3", "charge.dispute.closed", "pi_test_1", amount=400, status="won", balance_transactions=won)) == (
        "dispute won: gave back $4.00"
    )
    assert reversals(topup) == [("dispute", -400), ("dispute_won", 400)] and Account.balance_for(project) == 1000


@pytest.mark.parametrize(
    "dispute_currency, txn_currency, reason",
    [("eur", "usd", "refused: dispute in eur, not usd"), ("usd", "eur", "refused: dispute lost: refused txn_w: -1000 'eur' for a dispute of 1000")],
)
@pytest.mark.django_db
def test_a_dispute_or_its_withdrawal_in_another_currency_is_stored_and_refused_as_a_top_up_in_it_would_be(project, dispute_currency, txn_currency, reason):
    credited_topup(project, 1000)
    withdrawn = [balance_transaction("txn_w", -1000, currency=txn_currency)]
    payload = dispute_event(
        "evt_x", "charge.dispute.closed", "pi_test_1", amount=1000, status="lost", currency=dispute_currency, balance_transactions=withdrawn
    )
    assert deliver(payload) == reason
    assert StripeEvent.objects.get(event_id="evt_x").outcome == reason
    assert Account.balance_for(project) == 1000 and not LedgerEntry.objects.filter(kind__in=LedgerEntry.TOPUP_REVERSAL_KINDS).exists()
