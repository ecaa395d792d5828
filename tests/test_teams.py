"""Teams: invitations, members, ownership, several projects and the owner-only pages."""

import re
import threading
from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from belvedir.core.actions import create_account, invite_member
from belvedir.core.models import ApiKey, Invitation, Membership, Project

from .concurrency import someone_waits_on_a_lock, start_thread
from .harness_fixtures import wait_for
from .test_scoping_sweep import owners_objects  # noqa: F401  (a fixture: one object of every kind)

pytestmark = pytest.mark.django_db


@pytest.fixture
def carol(db):
    return create_account(username="carol", password="pw-carol-123", email="Carol@Example.com")


@pytest.fixture
def carol_client(carol):
    client = Client()
    client.force_login(carol)
    return client


def invite(owner_client, who):
    response = owner_client.post("/settings/members/", {"who": who})
    match = re.search(r'<code id="invitation-link">http://testserver(/invitations/[^"<]+/)</code>', response.content.decode())
    assert match, response.content.decode()
    return match.group(1)


def test_an_owner_invites_by_username_and_the_invitee_accepts(owner_client, carol_client, carol, project):
    link = invite(owner_client, "carol")
    page = carol_client.get(link)
    assert page.status_code == 200 and "Join alice&#x27;s project?" in page.content.decode()
    response = carol_client.post(link, {"answer": "accept"}, follow=True)
    assert Membership.objects.get(project=project, user=carol).role == "member"
    # The accepted project becomes the current one.
    assert "<h1>alice&#x27;s project</h1>" in response.content.decode()


def test_an_owner_invites_by_email_ignoring_case(owner_client, carol, project):
    invite(owner_client, "carol@example.COM")
    assert Invitation.objects.get(project=project).user == carol


def test_an_invitation_to_an_email_goes_to_that_emails_owner_alone(owner_client, project, django_user_model):
    victim = create_account(username="victim", password="pw-victim-123", email="victim@example.test")
    # Named like the victim's address before usernames refused @.
    attacker = django_user_model.objects.create_user(username="victim@example.test", password="pw-attacker-123")
    link = invite(owner_client, "victim@example.test")
    assert Invitation.objects.get().user == victim
    attackers, victims = Client(), Client()
    attackers.force_login(attacker)
    victims.force_login(victim)
    assert attackers.post(link, {"answer": "accept"}).status_code == 404
    assert victims.post(link, {"answer": "accept"}).status_code == 302
    assert set(Membership.objects.filter(project=project).values_list("user__username", flat=True)) == {"alice", "victim"}


def test_inviting_an_unknown_user_or_a_member_is_refused(owner_client, member):
    body = owner_client.post("/settings/members/", {"who": "nobody"}).content.decode()
    assert "No user &#x27;nobody&#x27;" in body
    body = owner_client.post("/settings/members/", {"who": "bob"}).content.decode()
    assert "bob is already a member" in body
    assert not Invitation.objects.exists()


def test_the_invitee_declines(owner_client, carol_client, carol, project):
    link = invite(owner_client, "carol")
    carol_client.post(link, {"answer": "decline"})
    assert not Membership.objects.filter(project=project, user=carol).exists()
    assert Invitation.objects.get().state == "declined"
    assert "This invitation is declined" in carol_client.post(link, {"answer": "accept"}).content.decode()


def test_an_invitation_is_single_use(owner_client, carol_client, carol, project):
    link = invite(owner_client, "carol")
    carol_client.post(link, {"answer": "accept"})
    Membership.objects.filter(project=project, user=carol).delete()
    again = carol_client.post(link, {"answer": "accept"})
    assert again.status_code == 410 and "is accepted and can no longer be used" in again.content.decode()
    assert not Membership.objects.filter(project=project, user=carol).exists()


@pytest.mark.django_db(transaction=True)
def test_one_invitation_accepted_twice_at_once_makes_one_membership(owner_client, carol, project, monkeypatch):
    from belvedir.core import actions

    link = invite(owner_client, "carol")
    # Both clicks find the invitation pending before either accepts it.
    both_read = threading.Barrier(2)
    found = actions.invitation_for

    def invitation_then_wait(*args):
        invitation = found(*args)
        both_read.wait(30)
        return invitation

    monkeypatch.setattr(actions, "invitation_for", invitation_then_wait)
    clicks = []
    for _ in range(2):
        client = Client()
        client.force_login(carol)
        clicks.append(start_thread(client.post, link, {"answer": "accept"}))
    for click in clicks:
        click.join(30)
    assert sorted(click.result.status_code for click in clicks) == [302, 410]
    assert list(Membership.objects.filter(project=project, user=carol).values_list("role", flat=True)) == ["member"]
    assert Invitation.objects.get().state == "accepted"


def test_an_invitation_expires(owner_client, carol_client, carol, project, settings):
    settings.INVITATION_MAX_AGE_DAYS = 2
    link = invite(owner_client, "carol")
    with time_machine.travel(timezone.now() + timedelta(days=2, minutes=1)):
        assert carol_client.get(link).status_code == 410
        response = carol_client.post(link, {"answer": "accept"})
    assert response.status_code == 410 and "is expired" in response.content.decode()
    assert not Membership.objects.filter(project=project, user=carol).exists()


def test_only_the_invited_user_can_use_the_link(owner_client, outsider_client, project):
    create_account(username="carol", password=None)
    link = invite(owner_client, "carol")
    assert outsider_client.post(link, {"answer": "accept"}).status_code == 404
    assert Membership.objects.filter(project=project).count() == 1


def test_removing_a_member_revokes_their_keys_for_that_project_only(owner_client, member, project, member_api):
    own_project = Membership.objects.get(user=member, role="owner").project
    _, other_raw = ApiKey.issue(project=own_project, user=member, name="elsewhere")
    assert member_api.get("/api/v1/me").status_code == 200
    membership = Membership.objects.get(project=project, user=member)
    owner_client.post(f"/settings/members/{membership.pk}/remove/")
    assert not Membership.objects.filter(project=project, user=member).exists()
    assert member_api.get("/api/v1/me").status_code == 401
    assert ApiKey.objects.get(project=own_project, user=member).revoked_at is None
    assert Client(HTTP_AUTHORIZATION=f"Bearer {other_raw}").get("/api/v1/me").status_code == 200


def test_a_member_leaves_and_lands_in_their_own_project(member_client, member, project):
    response = member_client.post("/settings/members/leave/", follow=True)
    assert not Membership.objects.filter(project=project, user=member).exists()
    assert "<h1>bob&#x27;s project</h1>" in response.content.decode()


def test_the_last_owner_cannot_leave(owner_client, owner, project):
    response = owner_client.post("/settings/members/leave/", follow=True)
    assert "hand over ownership first" in response.content.decode()
    assert Membership.objects.filter(project=project, user=owner, role="owner").exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["both leave", "they remove each other"])
def test_two_owners_going_at_once_leave_one_owner(owner, member, project, monkeypatch, how):
    Membership.objects.filter(project=project, user=member).update(role=Membership.Role.OWNER)
    alices, bobs = (Membership.objects.get(project=project, user=u).pk for u in (owner, member))
    alice, bob = Client(), Client()
    alice.force_login(owner)
    bob.force_login(member)
    session = bob.session
    session["project_id"] = project.pk
    session.save()
    # Alice's departure stops after its check that another owner remains, just
    # before it deletes her membership; Bob's goes meanwhile.
    checked, go = threading.Event(), threading.Event()
    delete = Membership.delete

    def delete_once_the_other_has_gone(self, *args, **kwargs):
        if self.pk == alices:
            checked.set()
            go.wait(30)
        return delete(self, *args, **kwargs)

    monkeypatch.setattr(Membership, "delete", delete_once_the_other_has_gone)
    if how == "both leave":
        alice_goes, bob_goes = (lambda: alice.post("/settings/members/leave/")), (lambda: bob.post("/settings/members/leave/"))
    else:
        alice_goes, bob_goes = (lambda: bob.post(f"/settings/members/{alices}/remove/")), (lambda: alice.post(f"/settings/members/{bobs}/remove/"))
    first = start_thread(alice_goes)
    try:
        assert checked.wait(30)
        second = start_thread(bob_goes)
        # Bob's request either finishes (nothing holds it back) or waits on a lock Alice's holds.
        wait_for(lambda: not second.is_alive() or someone_waits_on_a_lock(), timeout=30)
    finally:
        go.set()
    first.join(30)
    second.join(30)
    assert first.result.status_code == second.result.status_code == 302
    owners = list(Membership.objects.filter(project=project, role=Membership.Role.OWNER).values_list("user__username", flat=True))
    assert owners == ["bob"]


def test_an_owner_removed_meanwhile_cannot_hand_the_project_over(owner, member, carol, project):
    from belvedir.core.actions import remove_member, transfer_ownership
    from belvedir.core.errors import TeamError

    Membership.objects.filter(project=project, user=member).update(role=Membership.Role.OWNER)
    Membership.objects.create(project=project, user=carol)
    remove_member(project, owner)  # by Bob, while Alice's page still offers the hand-over
    with pytest.raises(TeamError) as refused:
        transfer_ownership(project, owner, carol)
    assert refused.value.status_code == 403
    roles = dict(Membership.objects.filter(project=project).values_list("user__username", "role"))
    assert roles == {"bob": "owner", "carol": "member"}


def test_an_owner_hands_over_ownership(owner_client, owner, member, project):
    membership = Membership.objects.get(project=project, user=member)
    owner_client.post(f"/settings/members/{membership.pk}/make-owner/")
    roles = dict(Membership.objects.filter(project=project).values_list("user__username", "role"))
    assert roles == {"alice": "member", "bob": "owner"}
    # Alice is now a member: owner-only pages are closed to her.
    assert owner_client.get("/settings/balance/").status_code == 403


def test_a_user_creates_a_project_and_switches_between_projects(owner_client, owner, project):
    response = owner_client.post("/projects/new/", {"name": "Research"}, follow=True)
    research = Project.objects.get(name="Research")
    assert Membership.objects.get(project=research, user=owner).role == "owner"
    body = response.content.decode()
    assert "<h1>Research</h1>" in body and 'id="project-switcher"' in body
    response = owner_client.post("/projects/switch/", {"project": project.pk}, follow=True)
    assert "<h1>alice&#x27;s project</h1>" in response.content.decode()


def test_switching_to_someone_elses_project_is_not_found(owner_client, outsider_project):
    assert owner_client.post("/projects/switch/", {"project": outsider_project.pk}).status_code == 404
    assert owner_client.post("/projects/switch/", {"project": "x"}).status_code == 404


def test_an_owner_deletes_the_project_after_confirming_its_name_and_the_balance_it_forfeits(owner_client, owner, project):
    from billing.actions import post_entry
    from billing.models import Account

    post_entry(Account.for_project(project), kind="coupon", amount_cents=100, reference="c1", user=owner)
    page = owner_client.get("/settings/members/").content.decode()
    assert 'id="delete-forfeit"' in page and "$1.00" in page and 'name="forfeit_cents" value="100"' in page
    owner_client.post("/settings/project/delete/", {"confirm": "wrong", "forfeit_cents": "100"})
    assert Project.objects.filter(pk=project.pk).exists()
    # A page drawn before the credit arrived showed nothing to forfeit: refused, with the amount.
    stale = owner_client.post("/settings/project/delete/", {"confirm": "alice's project", "forfeit_cents": "0"}, follow=True)
    assert Project.objects.filter(pk=project.pk).exists() and "balance is now $1.00" in stale.content.decode()
    response = owner_client.post("/settings/project/delete/", {"confirm": "alice's project", "forfeit_cents": "100"}, follow=True)
    assert not Project.objects.filter(pk=project.pk).exists()
    assert response.status_code == 200  # a fresh default project is made for the next page
    kept = Account.objects.get(project_name="alice's project")
    assert kept.project is None and kept.detached_at and kept.balance_cents == 100 and kept.entries.count() == 1


def test_deleting_a_project_keeps_its_money_and_a_later_stripe_refund_posts_to_its_account(owner_client, owner, project, staff_client, settings):
    from billing.actions import redeem_coupon
    from billing.models import Account, Coupon, CouponRedemption, LedgerEntry, StripeEvent, TopUp

    from .fakes.stripe_signing import checkout_event, refund_event, sign
    from .test_stripe import SECRET, post_webhook, recorded_topup

    settings.STRIPE_WEBHOOK_SECRET = SECRET
    account = Account.for_project(project)
    topup = recorded_topup(project, "cs_kept", 1000)
    paid = checkout_event("evt_paid", "cs_kept", amount_total=1000, client_reference_id=str(account.pk), payment_intent="pi_kept")
    assert post_webhook(paid, sign(paid, SECRET)).content == b"credited"
    Coupon.objects.create(code="KEPT", amount_cents=500)
    redeem_coupon(account, "KEPT", owner)
    owner_client.post("/settings/project/delete/", {"confirm": "alice's project", "forfeit_cents": "1500"})
    assert not Project.objects.filter(pk=project.pk).exists()

    account.refresh_from_db()
    assert (account.project, account.project_name, account.balance_cents) == (None, "alice's project", 1500)
    assert LedgerEntry.objects.filter(account=account).count() == 2
    assert TopUp.objects.filter(pk=topup.pk, account=account).exists() and CouponRedemption.objects.filter(account=account).exists()

    refund = refund_event("evt_refund_late", "pi_kept", amount=1000, amount_refunded=1000)
    assert post_webhook(refund, sign(refund, SECRET)).content.startswith(b"took back $10.00")
    account.refresh_from_db()
    assert account.balance_cents == 500 and StripeEvent.objects.filter(event_id="evt_refund_late").exists()
    assert topup.reversals().get().account == account

    listing = staff_client.get("/admin/billing/account/?detached=yes").content.decode()
    assert "alice&#x27;s project (deleted)" in listing and "$5.00" in listing
    assert staff_client.get(f"/admin/billing/account/{account.pk}/change/").status_code == 200


def test_a_project_in_debt_cannot_be_deleted_on_the_dashboard_or_in_admin(owner_client, owner, project, staff_client):
    from billing.actions import post_entry
    from billing.models import Account

    account = Account.for_project(project)
    post_entry(account, kind="topup", amount_cents=1000, reference="cs_x", memo="top-up")
    post_entry(account, kind="run_charge", amount_cents=-1000, reference="run:x", memo="run")
    post_entry(account, kind="topup_refund", amount_cents=-1000, reference="ch_x:refunded:1000", memo="refund")
    page = owner_client.get("/settings/members/").content.decode()
    assert 'id="delete-debt"' in page and "This project owes $10.00" in page and 'name="confirm"' not in page
    response = owner_client.post("/settings/project/delete/", {"confirm": "alice's project", "forfeit_cents": "0"}, follow=True)
    assert "owes $10.00" in response.content.decode() and Project.objects.filter(pk=project.pk).exists()
    assert staff_client.post(f"/admin/core/project/{project.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Project.objects.filter(pk=project.pk).exists() and Account.balance_for(project) == -1000


def test_members_work_but_owner_only_pages_are_403(member_client, project):
    for url in ["/settings/balance/", "/settings/secrets/"]:
        assert member_client.get(url).status_code == 403
    for url in ["/", "/harnesses/", "/evals/", "/traces/", "/settings/api-keys/", "/settings/members/"]:
        assert member_client.get(url).status_code == 200, url
    assert member_client.post("/settings/members/", {"who": "alice"}).status_code == 403
    assert member_client.post("/settings/project/delete/", {"confirm": "alice's project"}).status_code == 403
    assert Project.objects.filter(pk=project.pk).exists()


def test_a_member_revokes_only_their_own_keys(member_client, owner, project):
    owners_key = ApiKey.issue(project=project, user=owner, name="owner's")[0]
    assert member_client.post(f"/settings/api-keys/{owners_key.pk}/revoke/").status_code == 404
    owners_key.refresh_from_db()
    assert owners_key.revoked_at is None


def test_invite_action_hashes_the_token(project, owner, carol):
    invitation, raw = invite_member(project, owner, "carol")
    assert raw not in invitation.token_hash and len(invitation.token_hash) == 64


def test_members_are_not_shown_owner_only_links(member_client, member, owner, project):
    ApiKey.issue(project=project, user=owner, name="owner's")
    own = ApiKey.issue(project=project, user=member, name="mine")[0]
    settings_page = member_client.get("/settings/").content.decode()
    assert "/settings/balance/" not in settings_page and "/settings/secrets/" not in settings_page and "/settings/members/" in settings_page
    keys_page = member_client.get("/settings/api-keys/").content.decode()
    assert keys_page.count("Revoke</button>") == 1  # their own key, not the owner's
    assert f"/settings/api-keys/{own.pk}/revoke/" in keys_page


def test_deleting_a_project_takes_everything_but_waits_for_running_work(owners_objects, owner_client, project):
    from agent_tasks.models import Job, Trial
    from evals.models import Eval
    from harnesses.models import Run
    from traces.models import Span, Task, TraceSession

    session = TraceSession.objects.get(project=project)
    task = Task.objects.create(project=project, session=session, key="k", name="t", started_at=session.first_span_at, ended_at=session.last_span_at)
    Span.objects.create(
        project=project,
        trace_id="a" * 32,
        span_id="b" * 16,
        name="s",
        start_time=session.first_span_at,
        end_time=session.first_span_at,
        start_unix_nano=1,
        end_unix_nano=2,
        latency_ms=1,
        task=task,
    )
    response = owner_client.post("/settings/project/delete/", {"confirm": "alice's project"}, follow=True)
    assert "still in progress" in response.content.decode() and Project.objects.filter(pk=project.pk).exists()
    Run.objects.update(status="succeeded")
    Eval.objects.update(status="succeeded")
    Trial.objects.update(status="running")  # a job's trial in its sandbox
    response = owner_client.post("/settings/project/delete/", {"confirm": "alice's project"}, follow=True)
    assert "job trials are still in progress" in response.content.decode() and Project.objects.filter(pk=project.pk).exists()
    Trial.objects.update(status="succeeded", reward=1.0)
    owner_client.post("/settings/project/delete/", {"confirm": "alice's project"})
    assert not Project.objects.filter(pk=project.pk).exists()
    assert not Span.objects.exists() and not Run.objects.exists() and not Eval.objects.exists() and not Job.objects.exists() and not Trial.objects.exists()
