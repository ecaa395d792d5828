"""Model benchmark runs in real containers: the env contract, and a real GPU device request."""

import pytest

from belvedir.core.models import ProjectSecret
from belvedir.sandbox.models import SandboxHost
from billing.models import Account, LedgerEntry
from finetunes.actions import run_benchmark
from harnesses.execution import execute_run
from harnesses.models import Run

from .harness_fixtures import fund, harness, make_repo
from .test_models import make_zip

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

DOWNLOADING_HARNESS = """
import io, json, os, urllib.request, zipfile
data = urllib.request.urlopen(os.environ["ADAPTER_URL"], timeout=30).read()
members = zipfile.ZipFile(io.BytesIO(data)).namelist()
print("serving", os.environ["MODEL"], "with", members, "token", os.environ.get("HF_TOKEN"))
json.dump({"score": 0.81, "model": os.environ["MODEL_LABEL"], "base": os.environ["MODEL"], "members": members,
           "hf_ok": os.environ.get("HF_TOKEN") == "hf_secret_for_test"}, open("results.json", "w"))
"""


@pytest.fixture
def setup(settings, egress, tmp_path, project, owner):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from finetunes.models import FineTunedModel

    settings.MEDIA_ROOT = tmp_path / "media"
    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    # The default network: ADAPTER_URL (the platform) is reached through the egress proxy.
    fund(project, 5000)
    model = FineTunedModel(project=project, name="llama-support-v2", base_model="meta-llama/Llama-3.1-8B-Instruct")
    model.adapter.save("a.zip", SimpleUploadedFile("a.zip", make_zip()), save=False)
    model.save()
    return model


def test_a_model_benchmark_run_gets_the_model_env_and_lands_in_the_panel(setup, tmp_path, project, owner, api):
    # A CPU container stands in for the GPU: this host gives no device request.
    SandboxHost.objects.create(name="gpu-stand-in", url="unix:///var/run/docker.sock", kind="gpu", gpu_type="A10G", gpu_count=1, gpu_device_requests=False)
    ProjectSecret.objects.create(project=project, name="HF_TOKEN", value="hf_secret_for_test")
    make_repo(tmp_path / "repo", {"run.py": DOWNLOADING_HARNESS})
    gpu = harness(project, owner, tmp_path / "repo", compute_type="gpu", gpu_type="A10G")
    run = run_benchmark(setup, gpu, owner)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", (run.status_message, run.log_tail)
    assert run.results["members"] == ["adapter_config.json", "adapter_model.safetensors"]
    assert run.results["base"] == "meta-llama/Llama-3.1-8B-Instruct" and run.results["hf_ok"] is True
    assert run.model_label == "llama-support-v2" and run.price_cents == 500
    assert "hf_secret_for_test" not in run.log_tail and "token ********" in run.log_tail
    benchmarks = api.get(f"/api/v1/models/{setup.pk}/benchmarks").json()
    assert [(b["run"], b["score"]) for b in benchmarks] == [(run.pk, 0.81)]


def test_a_real_gpu_request_fails_to_launch_on_an_engine_without_nvidia_and_is_refunded_once(setup, tmp_path, project, owner):
    SandboxHost.objects.create(name="gpu-real", url="unix:///var/run/docker.sock", kind="gpu", gpu_type="A10G", gpu_count=1)
    make_repo(tmp_path / "repo", {"run.py": "print('never runs')"})
    gpu = harness(project, owner, tmp_path / "repo", compute_type="gpu", gpu_type="A10G")
    before = Account.balance_for(project)
    run = run_benchmark(setup, gpu, owner)
    assert Account.balance_for(project) == before - 500
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "launch_failed"
    assert "gpu" in run.status_message.lower()
    assert Account.balance_for(project) == before
    assert LedgerEntry.objects.filter(kind="refund", reference=f"run:{run.pk}").count() == 1
    assert Run.objects.get(pk=run.pk).host.name == "gpu-real"
