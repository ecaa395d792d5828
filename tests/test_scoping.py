"""Another project's objects are 404 everywhere: dashboard and API.

Each capability adds its object URLs to OBJECT_URLS as it lands.
"""

import pytest

from belvedir.core.models import ApiKey

from .pages import shown

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
    assert owners_key.prefix not in shown(outsider_client.get("/settings/api-keys/"))


def test_it_hides_another_projects_top_up(outsider_client, project, owner):
    from billing.models import Account, TopUp

    topup = TopUp.objects.create(account=Account.for_project(project), amount_cents=1000, created_by=owner)
    assert outsider_client.get(f"/settings/balance/topups/{topup.pk}/").status_code == 404


@pytest.fixture
def owners_run(owner, project):
    from harnesses.models import Harness, Run

    harness = Harness.objects.create(project=project, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    return Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=50)


def test_an_outsider_gets_404_on_every_harness_and_run_url(outsider_client, outsider_api, owners_run):
    h, r = owners_run.harness_id, owners_run.pk
    for url in [f"/harnesses/{h}/", f"/harnesses/{h}/edit/", f"/runs/{r}/"]:
        assert outsider_client.get(url).status_code == 404, url
    for url in [f"/harnesses/{h}/delete/", f"/harnesses/{h}/runs/", f"/runs/{r}/cancel/"]:
        assert outsider_client.post(url).status_code == 404, url
    for method, url in [
        ("get", f"/api/v1/harnesses/{h}"),
        ("patch", f"/api/v1/harnesses/{h}"),
        ("delete", f"/api/v1/harnesses/{h}"),
        ("post", f"/api/v1/harnesses/{h}/runs"),
        ("get", f"/api/v1/runs/{r}"),
        ("get", f"/api/v1/runs/{r}/log"),
        ("post", f"/api/v1/runs/{r}/cancel"),
    ]:
        assert getattr(outsider_api, method)(url).status_code == 404, url
    assert outsider_api.get("/api/v1/runs").json()["results"] == []
    assert outsider_api.get("/api/v1/harnesses").json()["results"] == []
    owners_run.refresh_from_db()
    assert owners_run.status == "queued"
