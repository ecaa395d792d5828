import pytest
from rest_framework.test import APIClient

from belvedir.core.models import ApiKey, hash_key

pytestmark = pytest.mark.django_db


def bearer(raw):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_it_issues_keys_with_prefix_and_stores_only_a_hash(owner, project):
    key, raw = ApiKey.issue(project=project, user=owner, name="ci")
    assert raw.startswith("bv_live_")
    assert len(raw) - len("bv_live_") >= 32
    assert key.prefix == raw[: len(key.prefix)] and len(key.prefix) < len(raw)
    key.refresh_from_db()
    assert key.key_hash == hash_key(raw)
    stored = ApiKey.objects.filter(pk=key.pk).values().get()
    assert raw not in {str(v) for v in stored.values()}


def test_it_answers_me_with_a_valid_key(api, owner, project):
    response = api.get("/api/v1/me")
    assert response.status_code == 200
    body = response.json()
    assert body["user"]["username"] == owner.username
    assert body["project"] == {"id": project.pk, "name": project.name}
    assert "balance_cents" in body


def test_it_records_last_use(api, owner):
    api.get("/api/v1/me")
    assert ApiKey.objects.get(user=owner).last_used_at is not None


@pytest.mark.parametrize(
    "header, message",
    [
        ("Bearer bv_live_short", "Malformed"),
        ("Bearer not-a-key-at-all-not-a-key-at-all-xx", "Malformed"),
        ("Bearer bv_live_" + "A" * 43, "Unknown"),
        ("Bearer ", "Malformed"),
    ],
)
def test_it_refuses_bad_keys_with_json_401(header, message):
    client = APIClient()
    response = client.get("/api/v1/me", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    assert message in response.json()["detail"]
    assert response["WWW-Authenticate"] == "Bearer"


def test_it_refuses_a_missing_key():
    response = APIClient().get("/api/v1/me")
    assert response.status_code == 401
    assert response.json()["detail"]


def test_it_refuses_a_revoked_key(owner, project):
    key, raw = ApiKey.issue(project=project, user=owner, name="old")
    assert bearer(raw).get("/api/v1/me").status_code == 200
    key.revoke()
    response = bearer(raw).get("/api/v1/me")
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_it_refuses_an_ingest_key_outside_ingest(owner, project):
    _, raw = ApiKey.issue(project=project, user=owner, name="run", scope=ApiKey.Scope.INGEST)
    response = bearer(raw).get("/api/v1/me")
    assert response.status_code == 403
    assert "ingest" in response.json()["detail"]


def test_a_read_key_reads_everything_and_changes_nothing_naming_its_scope(owner, project):
    from belvedir.core.models import ProjectSecret
    from evals.models import Deployment

    _, raw = ApiKey.issue(project=project, user=owner, name="agent", scope=ApiKey.Scope.READ)
    read = bearer(raw)
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")
    assert read.get("/api/v1/me").status_code == 200 and read.get(f"/api/v1/deployments/{deployment.pk}").status_code == 200
    for method, path, body in (
        ("post", "/api/v1/deployments", {"name": "e", "base_url": "https://api.example.com/v1", "model": "m"}),
        ("patch", f"/api/v1/deployments/{deployment.pk}", {"name": "renamed"}),
        ("delete", f"/api/v1/deployments/{deployment.pk}", None),
        ("post", "/api/v1/secrets", {"name": "HF_TOKEN", "value": "x"}),
        ("post", "/api/v1/traces", {"resourceSpans": []}),
    ):
        refused = getattr(read, method)(path, body, format="json")
        assert refused.status_code == 403 and "read-only (scope 'read')" in refused.json()["detail"], (method, path, refused.content)
    assert list(Deployment.objects.values_list("name", flat=True)) == ["d"] and not ProjectSecret.objects.exists()


def test_it_refuses_a_disabled_users_key(owner, project, api):
    owner.is_active = False
    owner.save()
    assert api.get("/api/v1/me").status_code == 401


def test_it_serves_the_openapi_schema_and_its_page(owner_client):
    schema = owner_client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/me" in schema.content
    page = owner_client.get("/api/docs/")
    assert page.status_code == 200
    assert b"swagger" in page.content.lower()
    # The UI's assets are served locally, never from a CDN.
    assert b"cdn" not in page.content.lower()


@pytest.mark.parametrize("path", ["/api/v1/me", "/api/v1/traces"])
def test_it_refuses_a_key_whose_owner_left_the_project(owner, project, path):
    from belvedir.core.actions import create_account
    from belvedir.core.models import Membership

    member = create_account(username="bob", password="pw-bob-12345")
    Membership.objects.create(project=project, user=member, role=Membership.Role.MEMBER)
    _, raw = ApiKey.issue(project=project, user=member, name="bob's", scope=ApiKey.Scope.INGEST if "traces" in path else ApiKey.Scope.FULL)
    client = bearer(raw)
    send = (lambda: client.post(path, {"resourceSpans": []}, format="json")) if "traces" in path else (lambda: client.get(path))
    assert send().status_code == 200
    # Removed some way that leaves the key itself untouched (admin, a script).
    Membership.objects.filter(project=project, user=member).delete()
    response = send()
    assert response.status_code == 401
    assert "no longer a member" in response.json()["detail"]


def test_the_schema_offers_bearer_key_authentication(owner_client):
    response = owner_client.get("/api/schema/?format=json")
    assert response.status_code == 200
    schemes = response.json()["components"]["securitySchemes"]
    assert schemes["ApiKeyAuth"] == {"type": "http", "scheme": "bearer", "bearerFormat": "bv_live_…"}
    me = response.json()["paths"]["/api/v1/me"]["get"]
    assert {"ApiKeyAuth": []} in me["security"]
