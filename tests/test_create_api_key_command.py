from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from belvedir.core.models import ApiKey

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command("create_api_key", *args, stdout=out)
    return out.getvalue().strip()


def test_it_prints_a_working_key(owner):
    raw = run("alice")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/me").json()["user"]["username"] == "alice"


def test_it_refuses_an_unknown_user_without_create(db):
    with pytest.raises(CommandError, match="--create"):
        run("nobody")


def test_it_creates_user_and_project_with_create(db):
    raw = run("newbie", "--project", "Research", "--create")
    key = ApiKey.objects.get(prefix=raw[:14])
    assert key.project.name == "Research"
    assert key.user.username == "newbie"


def test_it_refuses_a_project_the_user_is_not_in(owner, outsider):
    with pytest.raises(CommandError, match="not a member"):
        run("alice", "--project", outsider.memberships.get().project.name)
