"""Email verification: an address receives invitations and password resets only
once its account followed the signed link mailed to it; sign-up tells nobody
whether an address is registered."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from belvedir.core.actions import create_account
from belvedir.core.models import Invitation, Membership
from belvedir.core.verification import is_verified

from .pages import shown

pytestmark = pytest.mark.django_db

LINK = re.compile(r"http://testserver(/verify-email/[^/\s]+/)")
INVITATION_LINK = re.compile(r"http://testserver(/invitations/[^/\s]+/)")


@pytest.fixture(autouse=True)
def mail_settings(settings):
    settings.EMAIL_VERIFICATION_MAX_AGE_HOURS = 72
    settings.MAILS_PER_ADDRESS_PER_MINUTE = 100
    settings.INVITATION_MAX_AGE_DAYS = 7


def sign_up(username, email):
    client = Client()
    form = {"username": username, "email": email, "password1": "a-long-pass-42", "password2": "a-long-pass-42"}
    return client, client.post("/signup/", form)


def link_in(message) -> str:
    match = LINK.search(message.body)
    assert match, message.body
    return match.group(1)


def test_an_invitation_to_an_address_waits_for_whoever_verifies_it(owner_client, project, mailoutbox):
    # Mallory signs up first with Vera's address; she cannot read Vera's mail.
    mallory, _ = sign_up("mallory", "vera@example.test")
    body = shown(owner_client.post("/settings/members/", {"who": "vera@example.test"}))
    assert 'id="invitation-link"' not in body and "waits until someone verifies this address" in body
    invitation = Invitation.objects.get(project=project)
    assert invitation.user is None and invitation.state == "pending"
    # Nothing reached Mallory: no invitation mail, nothing to accept.
    assert [m.subject for m in mailoutbox] == ["Verify your address on Belvedir"]
    assert not Invitation.objects.filter(user__username="mallory").exists()

    vera, _ = sign_up("vera", "vera@example.test")
    assert mailoutbox[-1].to == ["vera@example.test"]
    page = vera.get(link_in(mailoutbox[-1]))
    assert "Verify vera@example.test" in shown(page)
    assert vera.post(link_in(mailoutbox[-1])).status_code == 302
    invitation.refresh_from_db()
    assert invitation.user.username == "vera"
    delivered = mailoutbox[-1]
    assert delivered.to == ["vera@example.test"] and delivered.subject == "Invitation to alice's project on Belvedir"
    link = INVITATION_LINK.search(delivered.body).group(1)
    assert mallory.post(link, {"answer": "accept"}).status_code == 404
    assert vera.post(link, {"answer": "accept"}).status_code == 302
    assert set(Membership.objects.filter(project=project).values_list("user__username", flat=True)) == {"alice", "vera"}
    # The squatter can no longer verify the address Vera holds.
    assert mallory.post(link_in(mailoutbox[0])).status_code == 409
    assert not is_verified(get_user_model().objects.get(username="mallory"))


def test_an_invitation_to_a_verified_address_is_mailed_and_shown_at_once(owner_client, project, mailoutbox):
    carol = create_account(username="carol", password="pw-carol-123", email="carol@example.test")
    body = shown(owner_client.post("/settings/members/", {"who": "CAROL@example.test"}))
    assert 'id="invitation-link"' in body
    assert Invitation.objects.get(project=project).user == carol
    assert [m.to for m in mailoutbox] == [["carol@example.test"]] and INVITATION_LINK.search(mailoutbox[0].body)


def test_a_mail_scanner_opening_the_link_verifies_nothing(mailoutbox):
    client, _ = sign_up("dave", "dave@example.test")
    assert Client().get(link_in(mailoutbox[0])).status_code == 200
    assert not is_verified(get_user_model().objects.get(username="dave"))


def test_the_verification_link_expires(mailoutbox):
    client, _ = sign_up("dave", "dave@example.test")
    link = link_in(mailoutbox[0])
    with time_machine.travel(timezone.now() + timedelta(hours=72, seconds=1)):
        assert "This verification link has expired" in shown(client.post(link), 410)
    assert not is_verified(get_user_model().objects.get(username="dave"))
    with time_machine.travel(timezone.now() + timedelta(hours=71)):
        assert client.post(link).status_code == 302
    assert is_verified(get_user_model().objects.get(username="dave"))


def test_a_tampered_link_is_refused(mailoutbox):
    client, _ = sign_up("dave", "dave@example.test")
    token = link_in(mailoutbox[0]).split("/")[2]
    value, signature = token.split(":", 1)

    def flip(text):
        return text[:-1] + ("A" if text[-1] != "A" else "B")

    # The payload changed under its signature, and the signature changed.
    for forged in [f"{flip(value)}:{signature}", f"{value}:{flip(signature)}", "not-a-token"]:
        assert "This verification link is not valid." in shown(client.post(f"/verify-email/{forged}/"), 400)
    assert not is_verified(get_user_model().objects.get(username="dave"))


def test_a_link_for_an_address_the_account_left_is_refused(mailoutbox):
    client, _ = sign_up("dave", "dave@example.test")
    old = link_in(mailoutbox[0])
    assert client.post("/settings/email/", {"action": "change", "email": "dave@elsewhere.test"}).status_code == 302
    assert mailoutbox[-1].to == ["dave@elsewhere.test"]
    assert shown(client.post(old), 410)
    assert not is_verified(get_user_model().objects.get(username="dave"))
    assert client.post(link_in(mailoutbox[-1])).status_code == 302
    assert "dave@elsewhere.test:\n    <strong>verified</strong>" in shown(client.get("/settings/email/"))


def test_the_email_page_resends_the_link(mailoutbox):
    client, _ = sign_up("dave", "dave@example.test")
    assert client.post("/settings/email/", {"action": "resend"}).status_code == 302
    assert [m.to for m in mailoutbox] == [["dave@example.test"]] * 2
    assert client.post(link_in(mailoutbox[1])).status_code == 302


def test_sign_up_with_a_registered_address_answers_as_a_new_one_and_mails_its_owner(owner, mailoutbox):
    answers = {}
    for username, email in [("newbie", "new@example.test"), ("eve", "ALICE@example.com")]:
        client, response = sign_up(username, email)
        flashed = [str(m).replace(email, "ADDRESS") for m in get_messages(response.wsgi_request)]
        home = client.get(response["Location"])
        answers[username] = (response.status_code, response["Location"], flashed, home.status_code)
    assert (
        answers["newbie"]
        == answers["eve"]
        == (302, "/", ["Welcome to Belvedir. Your project is ready. We sent a message to ADDRESS: check your inbox to verify the address."], 200)
    )
    new, existing = mailoutbox
    assert new.to == ["new@example.test"] and LINK.search(new.body)
    # Alice is told, and is sent nothing that would verify the address for eve.
    assert existing.to == ["alice@example.com"] and existing.subject == "Someone tried to use your address on Belvedir"
    assert "eve" in existing.body and not LINK.search(existing.body)
    assert is_verified(owner) and not is_verified(get_user_model().objects.get(username="eve"))


@pytest.mark.parametrize("verified", [True, False])
def test_a_password_reset_goes_only_to_a_verified_address(mailoutbox, verified):
    create_account(username="dave", password="old-pass-123", email="dave@example.test", verified=verified)
    response = Client().post("/password-reset/", {"email": "DAVE@example.test"})
    assert response.status_code == 302 and response["Location"] == "/password-reset/sent/"
    assert len(mailoutbox) == (1 if verified else 0)
    if verified:
        link = re.search(r"http://testserver(/reset/\S+/)", mailoutbox[0].body).group(1)
        client = Client()
        form_page = client.get(link, follow=True)
        assert "Choose a new password" in shown(form_page)
        done = client.post(form_page.redirect_chain[-1][0], {"new_password1": "new-pass-456!", "new_password2": "new-pass-456!"})
        assert done.status_code == 302
        assert Client().login(username="dave", password="new-pass-456!")


def test_the_admin_shows_whether_an_address_is_verified(staff_client, owner):
    create_account(username="dave", password="pw-dave-123", email="dave@example.test", verified=False)
    body = shown(staff_client.get("/admin/auth/user/"))
    assert "Email verified" in body
    assert re.search(r"alice.*?icon-yes", body, re.S) and re.search(r"dave.*?icon-no", body, re.S)
