"""Everything the dashboard does, the API does: models, members, invitations, secrets, deployments, datasets."""

from datetime import timedelta

import pytest
import time_machine
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.test import APIClient

from belvedir.core.actions import create_account
from belvedir.core.models import ApiKey, Membership, ProjectSecret
from evals.datasets.versions import create_dataset
from evals.models import Dataset, Deployment, Eval
from finetunes.models import FineTunedModel

from .test_models import make_zip

pytestmark = pytest.mark.django_db


def api_for(user, project):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiKey.issue(project=project, user=user, name='k')[1]}")
    return client


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


# -- models -------------------------------------------------------------------


def test_a_model_uploaded_through_the_api_lands_on_the_models_panel(api, owner_client, media):
    data = make_zip()
    response = api.post("/api/v1/models", {"name": "tuned-v3", "base_model": "org/base", "adapter": SimpleUploadedFile("lora.zip", data)}, format="multipart")
    assert response.status_code == 201, response.content
    model = FineTunedModel.objects.get(name="tuned-v3")
    assert response.json()["id"] == model.pk and model.adapter_size == len(data)
    assert model.adapter.read() == data
    assert "tuned-v3" in owner_client.get("/models/").content.decode()
    assert owner_client.get(f"/models/{model.pk}/").status_code == 200
    assert api.get(f"/api/v1/models/{model.pk}/benchmarks").json() == []


@pytest.mark.parametrize(
    "adapter, message",
    [
        (b"not a zip", "The adapter must be a zip file."),
        (make_zip({"../escape.txt": b"x"}), "Unsafe member name"),
    ],
)
def test_api_uploads_get_the_dashboards_validation(api, media, settings, adapter, message):
    response = api.post("/api/v1/models", {"name": "m", "base_model": "b", "adapter": SimpleUploadedFile("a.zip", adapter)}, format="multipart")
    assert response.status_code == 400 and message in str(response.json()["adapter"])
    assert not FineTunedModel.objects.exists()


def test_api_uploads_over_the_limit_stop_while_streaming(api, media, settings):
    settings.MODEL_ADAPTER_MAX_BYTES = 2000
    adapter = make_zip({"weights.bin": bytes(range(256)) * 400})
    response = api.post("/api/v1/models", {"name": "m", "base_model": "b", "adapter": SimpleUploadedFile("a.zip", adapter)}, format="multipart")
    assert response.status_code == 413 and "limit" in response.json()["detail"]
    assert not FineTunedModel.objects.exists()


def test_a_duplicate_model_name_or_missing_adapter_is_refused(api, media):
    upload = {"name": "m", "base_model": "b", "adapter": SimpleUploadedFile("a.zip", make_zip())}
    assert api.post("/api/v1/models", upload, format="multipart").status_code == 201
    again = api.post("/api/v1/models", {**upload, "adapter": SimpleUploadedFile("a.zip", make_zip())}, format="multipart")
    assert again.status_code == 400 and "already exists" in str(again.json()["name"])
    assert "adapter" in api.post("/api/v1/models", {"name": "n", "base_model": "b"}, format="multipart").json()


def test_deleting_a_model_removes_its_adapter(api, media, django_capture_on_commit_callbacks):
    api.post("/api/v1/models", {"name": "m", "base_model": "b", "adapter": SimpleUploadedFile("a.zip", make_zip())}, format="multipart")
    model = FineTunedModel.objects.get()
    path = model.adapter.path
    with django_capture_on_commit_callbacks(execute=True):
        assert api.delete(f"/api/v1/models/{model.pk}").status_code == 204
    assert not FineTunedModel.objects.exists()
    import os

    assert not os.path.exists(path)


# -- members and invitations ---------------------------------------------------


@pytest.fixture
def carol(db):
    return create_account(username="carol", password=None, email="carol@example.com")


def test_members_are_listed_to_everyone_in_the_project(member_api):
    body = member_api.get("/api/v1/members").json()
    assert [(m["username"], m["role"]) for m in body] == [("alice", "owner"), ("bob", "member")]


def test_an_invitation_is_made_and_accepted_through_the_api(api, carol, project):
    created = api.post("/api/v1/invitations", {"user": "carol@example.com"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["username"] == "carol" and body["state"] == "pending" and body["url"].endswith(f"/invitations/{body['token']}/")
    carol_api = api_for(carol, carol.memberships.get().project)
    accepted = carol_api.post("/api/v1/invitations/accept", {"token": body["token"]}, format="json")
    assert accepted.status_code == 200 and accepted.json()["project"]["id"] == project.pk
    assert Membership.objects.get(project=project, user=carol).role == "member"
    # Single use.
    again = carol_api.post("/api/v1/invitations/accept", {"token": body["token"]}, format="json")
    assert again.status_code == 410
    assert [i["state"] for i in api.get("/api/v1/invitations").json()] == ["accepted"]


def test_an_invitation_is_declined_or_expires_or_is_revoked(api, carol, settings):
    carol_api = api_for(carol, carol.memberships.get().project)
    first = api.post("/api/v1/invitations", {"user": "carol"}, format="json").json()
    assert carol_api.post("/api/v1/invitations/decline", {"token": first["token"]}, format="json").status_code == 204
    second = api.post("/api/v1/invitations", {"user": "carol"}, format="json").json()
    with time_machine.travel(timezone.now() + timedelta(days=settings.INVITATION_MAX_AGE_DAYS, seconds=1)):
        assert carol_api.post("/api/v1/invitations/accept", {"token": second["token"]}, format="json").status_code == 410
    third = api.post("/api/v1/invitations", {"user": "carol"}, format="json").json()
    assert api.delete(f"/api/v1/invitations/{third['id']}").status_code == 204
    assert carol_api.post("/api/v1/invitations/accept", {"token": third["token"]}, format="json").status_code == 410
    assert not Membership.objects.filter(user=carol).exclude(role="owner").exists()


def test_inviting_nobody_is_404_and_a_member_409(api, member):
    assert api.post("/api/v1/invitations", {"user": "ghost"}, format="json").status_code == 404
    assert api.post("/api/v1/invitations", {"user": "bob"}, format="json").status_code == 409


def test_owners_remove_members_and_their_keys_stop_working(api, member_api, member, project):
    membership = Membership.objects.get(project=project, user=member)
    assert member_api.delete(f"/api/v1/members/{Membership.objects.get(project=project, role='owner').pk}").status_code == 403
    assert api.delete(f"/api/v1/members/{membership.pk}").status_code == 204
    assert member_api.get("/api/v1/members").status_code == 401


def test_a_member_leaves_by_deleting_their_own_membership(member_api, member, project):
    membership = Membership.objects.get(project=project, user=member)
    assert member_api.delete(f"/api/v1/members/{membership.pk}").status_code == 204
    assert not Membership.objects.filter(project=project, user=member).exists()


def test_ownership_is_handed_over_with_patch(api, member_api, member, project, owner):
    membership = Membership.objects.get(project=project, user=member)
    assert member_api.patch(f"/api/v1/members/{membership.pk}", {"role": "owner"}, format="json").status_code == 403
    response = api.patch(f"/api/v1/members/{membership.pk}", {"role": "owner"}, format="json")
    assert response.status_code == 200 and response.json()["role"] == "owner"
    assert Membership.objects.get(project=project, user=owner).role == "member"
    assert api.patch(f"/api/v1/members/{membership.pk}", {"role": "owner"}, format="json").status_code == 403


def test_the_last_owner_cannot_leave(api, project):
    mine = Membership.objects.get(project=project, role="owner")
    response = api.delete(f"/api/v1/members/{mine.pk}")
    assert response.status_code == 409 and "hand over ownership" in response.json()["detail"]


# -- secrets -------------------------------------------------------------------


def test_owners_manage_secrets_whose_values_never_come_back(api, member_api, project):
    created = api.post("/api/v1/secrets", {"name": "HF_TOKEN", "value": "hf_secret"}, format="json")
    assert created.status_code == 201 and "value" not in created.json()
    rotated = api.post("/api/v1/secrets", {"name": "HF_TOKEN", "value": "hf_rotated"}, format="json")
    assert rotated.status_code == 201 and rotated.json()["id"] == created.json()["id"]  # replaced, not a second secret
    assert ProjectSecret.objects.get(project=project, name="HF_TOKEN").value == "hf_rotated"
    listed = api.get("/api/v1/secrets")
    assert [s["name"] for s in listed.json()] == ["HF_TOKEN"] and "hf_" not in listed.content.decode()
    assert api.post("/api/v1/secrets", {"name": "1bad", "value": "x"}, format="json").status_code == 400
    assert member_api.get("/api/v1/secrets").status_code == 403
    assert member_api.post("/api/v1/secrets", {"name": "X", "value": "x"}, format="json").status_code == 403
    assert api.delete(f"/api/v1/secrets/{created.json()['id']}").status_code == 204
    assert not ProjectSecret.objects.exists()


def test_members_cannot_read_the_ledger_or_redeem(member_api):
    assert member_api.get("/api/v1/balance").status_code == 403
    assert member_api.post("/api/v1/coupons/redeem", {"code": "X"}, format="json").status_code == 403
    assert member_api.get("/api/v1/me").json()["balance_cents"] == 0


# -- deployments and datasets ------------------------------------------------------


def test_deployments_are_patched_and_deleted(api, project):
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m", api_key="sk-old")
    response = api.patch(f"/api/v1/deployments/{deployment.pk}", {"model": "m2", "max_in_flight": 8}, format="json")
    assert response.status_code == 200 and response.json()["model"] == "m2"
    deployment.refresh_from_db()
    assert (deployment.model, deployment.max_in_flight, deployment.api_key) == ("m2", 8, "sk-old")
    assert api.patch(f"/api/v1/deployments/{deployment.pk}", {"base_url": "ftp://x"}, format="json").status_code == 400
    Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1)
    refused = api.delete(f"/api/v1/deployments/{deployment.pk}")
    assert refused.status_code == 409 and "evaluations" in refused.json()["detail"]
    Eval.objects.all().delete()
    assert api.delete(f"/api/v1/deployments/{deployment.pk}").status_code == 204


def test_datasets_are_uploaded_with_the_forms_rules_and_deleted(api, project, owner):
    bad = api.post("/api/v1/datasets", {"name": "x" * 101, "file": SimpleUploadedFile("d.jsonl", b'{"input": 1, "expected": 2}\n')}, format="multipart")
    assert bad.status_code == 400 and "name" in bad.json()
    created = api.post("/api/v1/datasets", {"name": "qa", "file": SimpleUploadedFile("d.jsonl", b'{"input": 1, "expected": 2}\n')}, format="multipart")
    assert created.status_code == 201 and created.json()["row_count"] == 1
    assert api.delete(f"/api/v1/datasets/{created.json()['id']}").status_code == 204
    used = create_dataset(project, owner, "used", b'{"input": 1, "expected": 2}\n')
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")
    Eval.objects.create(project=project, deployment=deployment, dataset=used, seed=1)
    assert api.delete(f"/api/v1/datasets/{used.pk}").status_code == 409
    assert Dataset.objects.filter(pk=used.pk).exists()
