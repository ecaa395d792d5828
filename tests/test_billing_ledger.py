from dataclasses import dataclass

import pytest

from belvedir.core.actions import create_account
from billing import workloads
from billing.actions import grant_credit, post_entry
from billing.errors import InsufficientBalance
from billing.models import Account, LedgerEntry

from .concurrency import run_concurrently


@dataclass
class FakeRun:
    """Stands in for a harness run: what billing reads from one."""

    pk: int
    project: object
    created_by: object
    compute_type: str = "cpu"
    price_cents: int = 50


def charge_for_run(run):
    """A run's charge as harnesses.actions.start_run posts it, through the paid workloads' lifecycle."""
    from harnesses.actions import RUNS

    return workloads.charge(RUNS, run, run.price_cents, memo=f"Run #{run.pk}", user=run.created_by)


def refund_run(run, reason):
    from harnesses.actions import RUNS

    return workloads.refund(RUNS, run, reason)


def fund(project, cents):
    account = Account.for_project(project)
    post_entry(account, kind="adjustment", amount_cents=cents, reference=f"test-fund:{project.pk}:{cents}", memo="test")
    return account


@pytest.mark.django_db
def test_a_charge_moves_the_balance_through_one_entry(project, owner):
    account = fund(project, 100)
    entry = charge_for_run(FakeRun(1, project, owner))
    account.refresh_from_db()
    assert account.balance_cents == 50
    assert (entry.kind, entry.amount_cents, entry.balance_after_cents, entry.reference) == ("run_charge", -50, 50, "run:1")
    assert entry.user == owner


@pytest.mark.django_db
def test_insufficient_balance_names_balance_and_price_and_changes_nothing(project, owner):
    fund(project, 30)
    with pytest.raises(InsufficientBalance, match=r"\$0.30 available, \$0.50 needed"):
        charge_for_run(FakeRun(1, project, owner))
    assert Account.balance_for(project) == 30
    assert not LedgerEntry.objects.filter(kind="run_charge").exists()


@pytest.mark.django_db
def test_charging_the_same_run_twice_charges_once(project, owner):
    fund(project, 100)
    run = FakeRun(7, project, owner)
    charge_for_run(run)
    charge_for_run(run)
    assert Account.balance_for(project) == 50


@pytest.mark.django_db
def test_refunds_are_idempotent(project, owner):
    fund(project, 100)
    run = FakeRun(3, project, owner, compute_type="gpu", price_cents=100)
    charge_for_run(run)
    assert Account.balance_for(project) == 0
    assert refund_run(run, "sandbox failed to launch") == 100
    assert refund_run(run, "again") == 0
    assert Account.balance_for(project) == 100
    assert LedgerEntry.objects.filter(kind="refund").count() == 1


@pytest.mark.django_db
def test_refunding_an_uncharged_run_does_nothing(project, owner):
    assert refund_run(FakeRun(99, project, owner), "x") == 0
    assert not LedgerEntry.objects.exists()


@pytest.mark.django_db
def test_entries_are_append_only(project):
    fund(project, 10)
    entry = LedgerEntry.objects.get()
    entry.memo = "changed"
    with pytest.raises(ValueError, match="append-only"):
        entry.save()
    with pytest.raises(ValueError, match="append-only"):
        entry.delete()


@pytest.mark.django_db
def test_grant_credit_needs_a_memo(project, owner):
    account = Account.for_project(project)
    with pytest.raises(ValueError, match="memo"):
        grant_credit(account, 500, " ", owner)
    grant_credit(account, 500, "goodwill", owner)
    assert Account.balance_for(project) == 500


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_charges_against_ten_runs_of_balance(project, owner):
    fund(project, 500)
    results = run_concurrently(lambda i: charge_for_run(FakeRun(1000 + i, project, owner)), 20)
    succeeded = [r for r in results if isinstance(r, LedgerEntry)]
    refused = [r for r in results if isinstance(r, InsufficientBalance)]
    assert len(succeeded) == 10 and len(refused) == 10
    assert Account.balance_for(project) == 0
    balances = sorted(e.balance_after_cents for e in succeeded)
    assert balances == list(range(0, 500, 50))


@pytest.mark.django_db
def test_me_reports_the_balance(api, project):
    fund(project, 1234)
    body = api.get("/api/v1/me").json()
    assert body["balance_cents"] == 1234 and body["balance"] == "12.34"


@pytest.mark.django_db
def test_balance_api_lists_recent_entries(api, project, outsider_project):
    fund(project, 700)
    fund(outsider_project, 900)
    body = api.get("/api/v1/balance").json()
    assert body["balance_cents"] == 700
    assert [e["amount_cents"] for e in body["entries"]] == [700]


@pytest.mark.django_db
def test_balance_page_shows_balance_and_ledger(owner_client, project):
    fund(project, 2500)
    page = owner_client.get("/settings/balance/").content.decode()
    assert "$25.00" in page
    assert "Adjustment" in page
    assert "not configured" in page  # STRIPE_SECRET_KEY is unset in tests


@pytest.mark.django_db
def test_admin_grant_credit_action(owner, project):
    from django.test import Client

    owner.is_staff = owner.is_superuser = True
    owner.save()
    client = Client()
    client.force_login(owner)
    account = Account.for_project(project)
    response = client.post(
        "/admin/billing/account/",
        {"action": "grant_credit_action", "_selected_action": [account.pk], "apply": "1", "amount": "12.50", "memo": "support"},
    )
    assert response.status_code == 302
    entry = LedgerEntry.objects.get(kind="adjustment")
    assert (entry.amount_cents, entry.memo, entry.user) == (1250, "support", owner)
    assert client.get(f"/admin/billing/ledgerentry/{entry.pk}/change/").status_code == 200
    assert client.post(f"/admin/billing/ledgerentry/{entry.pk}/delete/").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_the_same_charge_delivered_at_once_charges_once(project, owner):
    fund(project, 500)
    run = FakeRun(77, project, owner)
    results = run_concurrently(lambda i: charge_for_run(run), 6)
    assert all(isinstance(r, LedgerEntry) for r in results), results
    assert len({r.pk for r in results}) == 1
    assert LedgerEntry.objects.filter(kind="run_charge", reference="run:77").count() == 1
    assert Account.balance_for(project) == 450


@pytest.mark.django_db(transaction=True)
def test_the_reaper_and_the_worker_racing_over_one_run_refund_it_once(project, owner, tmp_path, settings):
    from django.utils import timezone

    from belvedir.sandbox.reaper import reap
    from harnesses.actions import finish_run, start_run
    from harnesses.models import Run

    from .harness_fixtures import harness

    fund(project, 1000)
    run = start_run(harness(project, owner, tmp_path), owner)
    # A run whose worker looks dead to the reaper just as the worker ends it
    # with a platform error (both refund).
    Run.objects.filter(pk=run.pk).update(status="running", heartbeat_at=timezone.now() - timezone.timedelta(hours=1))
    settings.HARNESS_STALE_SECONDS = 1

    def race(i):
        if i % 2:
            return reap()["reaped"]["run"]
        return int(finish_run(Run.objects.get(pk=run.pk), Run.Status.ERROR, refund_reason="engine lost", from_statuses=Run.IN_SANDBOX))

    ended = run_concurrently(race, 6)
    assert sum(ended) == 1, ended  # exactly one of them ended the run
    assert LedgerEntry.objects.filter(kind="refund", reference=f"run:{run.pk}").count() == 1
    assert Account.balance_for(project) == 1000


@pytest.mark.django_db(transaction=True)
def test_a_crash_while_refunding_leaves_the_run_unended_with_its_credentials_alive(project, owner, tmp_path, monkeypatch):
    """A run's end, its key and egress revocation and its refund commit together: a crash between them leaves none."""
    from belvedir.core.models import ApiKey
    from belvedir.sandbox import egress
    from harnesses import actions
    from harnesses.models import Run

    from .harness_fixtures import harness

    fund(project, 1000)
    run = actions.start_run(harness(project, owner, tmp_path), owner)
    key, _ = ApiKey.issue(project=project, user=owner, name="run", scope=ApiKey.Scope.INGEST, per_run=True)
    Run.objects.filter(pk=run.pk).update(status="running", api_key=key)
    egress.issue_grant(run.owner)

    def crash(*args):
        raise ConnectionError("worker lost mid-refund")

    monkeypatch.setattr(workloads, "refund_charge", crash)
    with pytest.raises(ConnectionError):
        actions.finish_run(Run.objects.get(pk=run.pk), Run.Status.ERROR, refund_reason="engine lost", from_statuses=Run.IN_SANDBOX)
    run.refresh_from_db()
    assert (run.status, run.finished_at) == ("running", None)
    assert ApiKey.objects.get(pk=key.pk).revoked_at is None
    assert run.egress_grant().revoked_at is None
    assert Account.balance_for(project) == 1000 - run.price_cents

    # Still active, so the next try (the reaper's) ends it whole.
    monkeypatch.undo()
    assert actions.finish_run(Run.objects.get(pk=run.pk), Run.Status.ERROR, refund_reason="engine lost", from_statuses=Run.IN_SANDBOX)
    run.refresh_from_db()
    assert run.status == "error" and ApiKey.objects.get(pk=key.pk).revoked_at and run.egress_grant().revoked_at
    assert Account.balance_for(project) == 1000


def _refused_by_the_database(attempt):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        attempt()


@pytest.mark.django_db
def test_the_database_refuses_to_update_ledger_rows_however_asked(project):
    from django.db import connection

    fund(project, 10)
    entry = LedgerEntry.objects.get()

    def raw_update():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE billing_ledgerentry SET amount_cents = 1000000, balance_after_cents = 1000000 WHERE id = %s", [entry.pk])

    _refused_by_the_database(raw_update)
    _refused_by_the_database(lambda: LedgerEntry.objects.filter(pk=entry.pk).update(memo="rewritten"))
    _refused_by_the_database(lambda: LedgerEntry.objects.update(user=None, amount_cents=0))  # nulling the user hides nothing else
    entry.refresh_from_db()
    assert (entry.amount_cents, entry.memo) == (10, "test")


@pytest.mark.django_db
def test_the_database_refuses_to_delete_ledger_rows_however_asked(project):
    from django.db import connection

    fund(project, 10)

    def raw_delete():
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM billing_ledgerentry")

    _refused_by_the_database(raw_delete)
    _refused_by_the_database(lambda: LedgerEntry.objects.all().delete())
    assert LedgerEntry.objects.count() == 1


@pytest.mark.django_db
def test_deleting_a_user_forgets_who_made_an_entry_and_keeps_the_entry(project, owner):
    from belvedir.core.models import Membership

    bob = create_account(username="bob", password=None)
    Membership.objects.create(project=project, user=bob)
    post_entry(Account.for_project(project), kind="adjustment", amount_cents=25, reference="by-bob", memo="goodwill", user=bob)
    bob.delete()
    entry = LedgerEntry.objects.get(reference="by-bob")
    assert (entry.user, entry.amount_cents, entry.memo) == (None, 25, "goodwill")


@pytest.mark.django_db
def test_only_a_reversal_may_leave_a_ledger_balance_below_zero_in_the_database(project):
    from django.db import IntegrityError, transaction

    account = fund(project, 10)
    with pytest.raises(IntegrityError, match="ledger_below_zero_only_by_reversal"), transaction.atomic():
        LedgerEntry.objects.create(account=account, kind="run_charge", amount_cents=-50, balance_after_cents=-40, reference="run:raw")
    LedgerEntry.objects.create(account=account, kind="topup_refund", amount_cents=-50, balance_after_cents=-40, reference="ch_1:refunded:50")
    LedgerEntry.objects.create(account=account, kind="coupon", amount_cents=20, balance_after_cents=-20, reference="redemption:raw")
