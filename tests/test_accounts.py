import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils.html import escape

from belvedir.core.models import ApiKey, Membership

from .pages import shown

pytestmark = pytest.mark.django_db


def test_it_signs_up_with_a_default_project_and_logs_in():
    client = Client()
    response = client.post("/signup/", {"username": "bob", "email": "bob@example.com", "password1": "a-long-pass-42", "password2": "a-long-pass-42"})
    assert response.status_code == 302
    user = get_user_model().objects.get(username="bob")
    membership = Membership.objects.get(user=user)
    assert membership.role == "owner"
    home = client.get("/")
    assert home.status_code == 200
    assert escape(membership.project.name) in home.content.decode()


def test_it_shows_signup_errors_beside_fields():
    response = Client().post("/signup/", {"username": "", "password1": "x", "password2": "y"})
    assert response.status_code == 200
    assert b"errorlist" in response.content


def test_a_username_cannot_be_an_email_address(staff_client):
    from django.core.exceptions import ValidationError

    from belvedir.core.actions import create_account

    form = {"username": "victim@example.test", "password1": "a-long-pass-42", "password2": "a-long-pass-42"}
    response = Client().post("/signup/", form)
    assert response.status_code == 200 and "A username cannot contain @" in response.content.decode()
    added = staff_client.post("/admin/auth/user/add/", {**form, "usable_password": "true"})
    assert added.status_code == 200 and "A username cannot contain @" in added.content.decode()
    with pytest.raises(ValidationError):
        create_account(username="victim@example.test", password=None)
    assert not get_user_model().objects.filter(username__contains="@").exists()


def test_the_admin_renames_an_email_shaped_username_but_keeps_no_new_one(staff_client, owner):
    legacy = get_user_model().objects.create_user(username="old@example.test")  # from before the rule
    fields = {"username": "old@example.test", "email": "", "is_active": "on", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"}
    kept = staff_client.post(f"/admin/auth/user/{legacy.pk}/change/", {**fields, "first_name": "Old"})
    assert kept.status_code == 302
    refused = staff_client.post(f"/admin/auth/user/{owner.pk}/change/", {**fields, "username": "alice@example.com", "is_staff": "on", "is_superuser": "on"})
    assert refused.status_code == 200 and "A username cannot contain @" in refused.content.decode()
    assert get_user_model().objects.get(pk=owner.pk).username == "alice"


def test_it_logs_in_and_out(owner):
    client = Client()
    assert client.get("/").status_code == 302
    response = client.post("/login/", {"username": "alice", "password": "pw-alice-123"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    client.post("/logout/")
    assert client.get("/").status_code == 302


def test_it_rejects_a_wrong_password(owner):
    response = Client().post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"correct username and password" in response.content


def test_it_creates_a_key_shown_once_and_revokes_it(owner_client, owner):
    response = owner_client.post("/settings/api-keys/", {"name": "laptop", "scope": "full"})
    assert response.status_code == 200
    raw = re.search(rb"bv_live_[A-Za-z0-9_-]{32,}", response.content).group().decode()
    key = ApiKey.objects.get(user=owner, name="laptop")
    assert raw.startswith(key.prefix)
    listing = shown(owner_client.get("/settings/api-keys/"))
    assert key.prefix in listing
    assert raw not in listing
    owner_client.post(f"/settings/api-keys/{key.pk}/revoke/")
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_it_gives_a_user_made_in_admin_a_project_on_first_visit(db):
    user = get_user_model().objects.create_user("carol", password="pw-carol-123")
    client = Client()
    client.force_login(user)
    assert client.get("/").status_code == 200
    assert Membership.objects.filter(user=user).count() == 1


def test_pages_render_without_javascript_and_ship_htmx_locally(owner_client):
    page = owner_client.get("/settings/").content.decode()
    assert 'href="/settings/api-keys/"' in page
    assert "/static/vendor/htmx-2.0.11.min.js" in page
    assert "https://" not in page
