"""LoRA adapters of the local model: which the Models page takes and refuses, and the runtime applying one, against the real weights.

The adapters are real (tests/adapters.py writes them with the `gguf`
package); the weights come from `manage.py install_local_model`.
"""

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from belvedir.localmodel import adapters as checks
from belvedir.localmodel import files
from belvedir.localmodel.runtime import AdapterError, Prompt, Runtime, Sampling
from billing.models import Account
from finetunes.models import FineTunedModel
from harnesses.models import Harness, Run

from .adapters import TARGET, letter_adapter, write_adapter, zipped
from .harness_fixtures import fund
from .test_models import make_zip

LOCAL = files.MODEL_ID
PROMPT = "Which of these is a colour?\nA. Seven\nB. Tuesday\nC. Blue\nD. Paris\nAnswer:"


def weights() -> Path:
    return files.verify(files.model_path(settings.LOCAL_MODEL_DIR), digest=False)


@pytest.fixture(scope="module")
def adapter(tmp_path_factory) -> Path:
    return letter_adapter(weights(), tmp_path_factory.mktemp("lora") / "answers-c.gguf", "C")


def upload(client, name, base_model, data):
    return client.post("/models/", {"name": name, "base_model": base_model, "adapter": SimpleUploadedFile(f"{name}.zip", data)})


def rank_one(target, inputs, outputs) -> dict[str, np.ndarray]:
    return {f"{target}.lora_a": np.ones((1, inputs)), f"{target}.lora_b": np.ones((outputs, 1))}


def letter_logprobs(runtime: Runtime, *, adapter: bool) -> dict[str, float]:
    """log P(" A"…" D" | PROMPT), as lm-eval scores a multiple-choice answer."""
    context = runtime.tokenize(PROMPT)
    scores = {}
    for letter in "ABCD":
        event = next(runtime.generate(runtime.tokenize(PROMPT + " " + letter), Sampling(max_tokens=0, temperature=0), prompt_logprobs=0, adapter=adapter))
        assert isinstance(event, Prompt)
        scores[letter] = sum(token.logprob for token in event.tokens[len(context) :])
    return scores


def test_the_runtime_applies_the_adapter_only_to_requests_that_ask_for_it(adapter):
    runtime = Runtime(weights(), n_ctx=512, adapter=adapter)
    try:
        before = letter_logprobs(runtime, adapter=False)
        with_adapter = letter_logprobs(runtime, adapter=True)
        after = letter_logprobs(runtime, adapter=False)
    finally:
        runtime.close()
    plain = Runtime(weights(), n_ctx=512)
    try:
        alone = letter_logprobs(plain, adapter=False)
    finally:
        plain.close()
    assert max(with_adapter, key=with_adapter.get) == "C" != max(alone, key=alone.get)
    assert with_adapter["C"] - alone["C"] > 1
    # The base answers as a runtime without any adapter does, before and after the adapter was used.
    assert before == after == alone


def test_the_runtime_refuses_an_adapter_made_for_another_model(tmp_path):
    other = write_adapter(tmp_path / "other.gguf", rank_one(TARGET, 512, 512))
    with pytest.raises(AdapterError, match="could not load the adapter"):
        Runtime(weights(), n_ctx=512, adapter=other)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: write_adapter(d / "x.gguf", rank_one(TARGET, 512, 512)), "is 576×576 in the base model"),
        (lambda d: write_adapter(d / "x.gguf", rank_one("output.weight", 576, 49152)), "which the base model does not have"),
        (lambda d: write_adapter(d / "x.gguf", rank_one(TARGET, 576, 576), kind="model"), "not a LoRA adapter"),
        (lambda d: write_adapter(d / "x.gguf", rank_one(TARGET, 576, 576), architecture="qwen2"), "adapts a qwen2 model"),
        (lambda d: write_adapter(d / "x.gguf", {f"{TARGET}.lora_a": np.ones((1, 576))}), "not both"),
        (lambda d: (d / "x.gguf").write_bytes(b"GGUF" + b"\xff" * 64) and d / "x.gguf", "not a readable GGUF file"),
    ],
)
def test_an_adapter_that_does_not_fit_the_local_model_is_refused_and_says_why(tmp_path, make, message):
    with pytest.raises(checks.AdapterMismatch, match=message):
        checks.check(make(tmp_path), weights())


@pytest.mark.django_db
def test_a_gguf_adapter_of_the_local_model_is_taken_for_cpu(owner_client, settings, tmp_path, adapter):
    settings.MEDIA_ROOT = tmp_path / "media"
    response = upload(owner_client, "smol-c", LOCAL, zipped(adapter))
    model = FineTunedModel.objects.get(name="smol-c")
    assert response.status_code == 302 and model.adapter_format == "gguf"
    page = owner_client.get(model.get_absolute_url()).content.decode()
    assert "CPU, with the local model" in page and "?preset=local-model" in page


@pytest.mark.parametrize(
    ("base_model", "make", "message"),
    [
        # A GGUF adapter whose tensors do not fit the local model: made for another model.
        (LOCAL, lambda d, _: zipped(write_adapter(d / "x.gguf", rank_one(TARGET, 512, 512))), "it was made for another model"),
        # A GGUF adapter said to be of a base the CPU path does not have.
        ("meta-llama/Llama-3.1-8B-Instruct", lambda d, adapter: zipped(adapter), "their base must be SmolLM2-135M-Instruct"),
        # A PEFT adapter trained on another base than the upload says.
        ("org/base", lambda d, _: make_zip({"adapter_config.json": json.dumps({"base_model_name_or_path": "org/other"})}), "trained on org/other"),
        # Neither format.
        ("org/base", lambda d, _: make_zip({"weights.bin": b"\0" * 64}), "must hold a PEFT adapter"),
    ],
)
@pytest.mark.django_db
def test_an_adapter_for_another_base_is_refused_on_upload_and_nothing_is_stored(owner_client, settings, tmp_path, adapter, base_model, make, message):
    settings.MEDIA_ROOT = tmp_path / "media"
    response = upload(owner_client, "m", base_model, make(tmp_path, adapter))
    assert response.status_code == 200 and message in response.content.decode()
    assert not FineTunedModel.objects.exists()
    assert not (tmp_path / "media").exists() or not any((tmp_path / "media").rglob("*.zip"))


@pytest.mark.django_db
def test_a_gguf_member_that_inflates_past_the_upload_limit_is_refused_before_it_is_written_out(owner_client, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.MODEL_ADAPTER_MAX_BYTES = 1 << 20
    # 8 MB of zeros deflate to a few KB: within the upload's size, 8 times an adapter's once unpacked.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("adapter/x.gguf", b"GGUF" + b"\0" * (8 << 20))
    bomb = buffer.getvalue()
    assert len(bomb) < settings.MODEL_ADAPTER_MAX_BYTES
    response = upload(owner_client, "m", LOCAL, bomb)
    assert response.status_code == 200 and "x.gguf unpacks to 8.4 MB; an adapter may be 1 MB." in response.content.decode()
    assert not FineTunedModel.objects.exists()


@pytest.mark.django_db
def test_a_gguf_model_runs_only_on_a_cpu_harness_with_the_local_model_and_nothing_is_charged_otherwise(
    owner_client, api, settings, tmp_path, project, owner, adapter
):
    settings.MEDIA_ROOT = tmp_path / "media"
    fund(project, 5000)
    upload(owner_client, "smol-c", LOCAL, zipped(adapter))
    model = FineTunedModel.objects.get(name="smol-c")
    common = dict(project=project, created_by=owner, repo_url="https://x.org/a/b", install_command="true", run_command="true")
    gpu = Harness.objects.create(name="vllm", compute_type="gpu", gpu_type="A10G", **common)
    plain_cpu = Harness.objects.create(name="plain", **common)
    local = Harness.objects.create(name="local", local_model=True, **common)
    page = owner_client.get(model.get_absolute_url()).content.decode()
    assert f'value="{local.pk}"' in page and f'value="{gpu.pk}"' not in page and f'value="{plain_cpu.pk}"' not in page
    before = Account.balance_for(project)
    for harness in (gpu, plain_cpu):
        response = owner_client.post(f"/models/{model.pk}/runs/", {"harness": harness.pk}, follow=True)
        assert "Choose a CPU harness with the local model of this project." in response.content.decode()
        answer = api.post(f"/api/v1/models/{model.pk}/runs", {"harness": harness.pk}, format="json")
        assert answer.status_code == 400 and "CPU harness with the local model" in answer.json()["harness"][0]
    assert Account.balance_for(project) == before and not Run.objects.exists()
