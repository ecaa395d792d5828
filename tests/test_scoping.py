"""Another project's objects are 404 everywhere: dashboard and API.

Each capability adds its object URLs to OBJECT_URLS as it lands.
"""

import pytest

from belvedir.core.models import ApiKey

pytestmark = pytest.mark.django_db


@pytest.fixture
def owners_key(owner, project):
    return ApiKey.issue(project=project, user=owner, name="mine")[0]


def test_it_hides_another_projects_key_from_the_dashboard(outsider_client, owners_key):
    response = outsider_client.post(f"/settings/api-keys/{owners_key.pk}/revoke/")
    assert response.status_code == 404
    owners_key.refresh_from_db()
    assert owners_key.revoked_at is None


def test_it_lists_only_the_users_own_keys(outsider_client, owners_key):
    assert owners_key.prefix.encode() not in outsider_client.get("/settings/api-keys/").content


def test_it_hides_another_projects_top_up(outsider_client, project, owner):
    from billing.models import Account, TopUp

    topup = TopUp.objects.create(account=Account.for_project(project), amount_cents=1000, created_by=owner)
    assert outsider_client.get(f"/settings/balance/topups/{topup.pk}/").status_code == 404
