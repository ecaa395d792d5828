"""Fine-tuned models: uploads, signed adapter URLs, GPU scheduling, the benchmarks panel."""

import io
import zipfile
from datetime import timedelta

import pytest
import time_machine
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from belvedir.core.models import ProjectSecret
from belvedir.sandbox import scheduler
from belvedir.sandbox.errors import NoCapacity
from belvedir.sandbox.models import SandboxHost
from belvedir.sandbox.owners import Owner
from billing.models import Account
from finetunes.models import FineTunedModel
from finetunes.signing import adapter_url
from harnesses.models import Harness, Run

from .harness_fixtures import fund
from .pages import shown


def make_zip(members=None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in (members or {"adapter_config.json": b'{"r": 8}', "adapter_model.safetensors": b"\0" * 1024}).items():
            archive.writestr(name, content)
    return buffer.getvalue()


@pytest.fixture
def model(project, owner, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    instance = FineTunedModel(project=project, name="llama-support-v2", base_model="meta-llama/Llama-3.1-8B-Instruct", created_by=owner)
    data = make_zip()
    instance.adapter.save("a.zip", SimpleUploadedFile("a.zip", data), save=False)
    instance.adapter_size = len(data)
    instance.save()
    return instance


@pytest.fixture
def gpu_harness(project, owner):
    return Harness.objects.create(
        project=project,
        created_by=owner,
        name="lm-eval",
        repo_url="https://x.org/a/b",
        install_command="true",
        run_command="true",
        compute_type="gpu",
        gpu_type="A10G",
    )


@pytest.fixture
def gpu_host(db):
    return SandboxHost.objects.create(name="gpu-1", url="unix:///var/run/docker.sock", kind="gpu", gpu_type="A10G", gpu_count=2, capacity=4)


def a_run(project, harness):
    return Run.objects.create(project=project, harness=harness, compute_type="gpu", price_cents=500)


@pytest.mark.django_db
def test_uploading_a_model(owner_client, project, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    response = owner_client.post("/models/", {"name": "m1", "base_model": "org/base", "adapter": SimpleUploadedFile("lora.zip", make_zip())})
    model = FineTunedModel.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/models/{model.pk}/"
    assert model.adapter_size > 0 and "lora" not in model.adapter.name


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"not a zip at all", "must be a zip"),
        (make_zip({"../../etc/passwd": b"x"}), "Unsafe member name"),
        (make_zip({"/abs/path": b"x"}), "Unsafe member name"),
        (make_zip({"big.bin": b"\0" * 3000}), "The upload is larger than the"),
    ],
)
@pytest.mark.django_db
def test_bad_adapters_are_refused(owner_client, settings, tmp_path, payload, message):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.MODEL_ADAPTER_MAX_BYTES = 2000
    response = owner_client.post("/models/", {"name": "m", "base_model": "b", "adapter": SimpleUploadedFile("a.zip", payload)})
    assert message in response.content.decode()
    assert not FineTunedModel.objects.exists()


@pytest.mark.django_db
def test_signed_urls(model, project, gpu_harness, settings):
    run, other = a_run(project, gpu_harness), a_run(project, gpu_harness)
    url = adapter_url(model, run).removeprefix(settings.BELVEDIR_BASE_URL)
    client = Client()
    ok = client.get(url)
    assert ok.status_code == 200 and ok.streaming
    assert b"".join(ok.streaming_content) == model.adapter.open("rb").read()
    token = url.rstrip("/").rsplit("/", 1)[1]
    assert client.get(url.replace(token, token[:-2] + ("AA" if not token.endswith("AA") else "BB"))).status_code == 403  # tampered
    assert client.get(url.replace(f"/adapter/{run.pk}/", f"/adapter/{other.pk}/")).status_code == 403  # another run
    assert client.get(f"/models/{model.pk}/adapter/{run.pk}/forged:token/").status_code == 403
    with time_machine.travel(timezone.now() + timedelta(seconds=settings.MODEL_ADAPTER_URL_MAX_AGE + 5)):
        assert client.get(url).status_code == 403  # expired


@pytest.mark.django_db
def test_a_large_adapter_streams(project, owner, gpu_harness, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    big = FineTunedModel(project=project, name="big", base_model="b")
    big.adapter.save("big.zip", SimpleUploadedFile("big.zip", make_zip({"weights.bin": b"\1" * (40 * 1024 * 1024)})), save=False)
    big.save()
    response = Client().get(adapter_url(big, a_run(project, gpu_harness)).removeprefix(settings.BELVEDIR_BASE_URL))
    chunks = [len(chunk) for chunk in response.streaming_content]
    assert sum(chunks) == big.adapter.size and len(chunks) > 10 and max(chunks) <= 64 * 1024


@pytest.mark.django_db
def test_no_gpu_host_is_a_clear_message_before_any_charge(api, owner_client, project, model, gpu_harness):
    fund(project, 1000)
    response = api.post(f"/api/v1/models/{model.pk}/runs", {"harness": gpu_harness.pk}, format="json")
    assert response.status_code == 409 and "No enabled GPU sandbox host with A10G GPUs" in response.json()["detail"]
    page = owner_client.post(f"/models/{model.pk}/runs/", {"harness": gpu_harness.pk}, follow=True).content.decode()
    assert "Nothing was charged" in page
    assert Account.balance_for(project) == 1000 and not Run.objects.exists()


@pytest.mark.django_db
def test_gpu_slots_capacity_and_draining(gpu_host, api, project, model, gpu_harness):
    fund(project, 5000)
    first = scheduler.acquire_host(Owner("run", "a"), kind="gpu", gpu_type="A10G")
    second = scheduler.acquire_host(Owner("run", "b"), kind="gpu", gpu_type="A10G")
    assert {first.gpu_slot, second.gpu_slot} == {0, 1}
    assert api.post(f"/api/v1/models/{model.pk}/runs", {"harness": gpu_harness.pk}, format="json").status_code == 409
    scheduler.release(Owner("run", "a"))
    assert api.post(f"/api/v1/models/{model.pk}/runs", {"harness": gpu_harness.pk}, format="json").status_code == 201
    SandboxHost.objects.filter(pk=gpu_host.pk).update(draining=True)
    with pytest.raises(NoCapacity):
        scheduler.acquire_host(Owner("run", "c"), kind="gpu", gpu_type="A10G")


@pytest.mark.django_db
def test_gpu_hosts_take_cpu_runs_only_when_allowed(gpu_host, settings):
    SandboxHost.objects.filter(kind="cpu").update(enabled=False)
    with pytest.raises(NoCapacity):
        scheduler.acquire_host(Owner("run", "cpu"))
    settings.GPU_HOSTS_TAKE_CPU_RUNS = True
    lease = scheduler.acquire_host(Owner("run", "cpu"))
    assert lease.host == gpu_host and lease.gpu_slot is None


@pytest.mark.django_db
def test_model_api_and_panel_list_runs_that_name_the_model(api, owner_client, outsider_api, project, model, gpu_harness):
    for score, label in [(0.5, "llama-support-v2"), (0.7, "llama-support-v2"), (0.9, "someone-else")]:
        Run.objects.create(project=project, harness=gpu_harness, compute_type="gpu", price_cents=500, status="succeeded", score=score, model_label=label)
    assert [m["name"] for m in api.get("/api/v1/models").json()] == ["llama-support-v2"]
    benchmarks = api.get(f"/api/v1/models/{model.pk}/benchmarks").json()
    assert sorted(b["score"] for b in benchmarks) == [0.5, 0.7] and benchmarks[0]["harness"] == "lm-eval"
    page = owner_client.get(f"/models/{model.pk}/").content.decode()
    assert "<svg" in page and "0.7" in page and "0.9" not in page
    assert outsider_api.get(f"/api/v1/models/{model.pk}/benchmarks").status_code == 404
    assert outsider_api.post(f"/api/v1/models/{model.pk}/runs", {"harness": gpu_harness.pk}, format="json").status_code == 404


@pytest.mark.django_db
def test_secrets_are_masked_and_scoped(owner_client, outsider_client, project):
    owner_client.post("/settings/secrets/", {"name": "HF_TOKEN", "value": "hf_very_secret_value"})
    secret = ProjectSecret.objects.get()
    assert secret.value == "hf_very_secret_value"
    listing = shown(owner_client.get("/settings/secrets/"))
    assert "HF_TOKEN" in listing and "hf_very_secret_value" not in listing
    assert outsider_client.post(f"/settings/secrets/{secret.pk}/delete/").status_code == 404
    assert outsider_client.get("/models/").status_code == 200
