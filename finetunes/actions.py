from django.db import transaction

from belvedir.core.models import ProjectSecret
from belvedir.sandbox.models import ComputeType
from harnesses.actions import start_run
from harnesses.models import Harness

from . import formats
from .signing import adapter_url

PASSED_SECRETS = ("HF_TOKEN",)


def benchmark_env(model):
    """The extra env a model benchmark run gets: (env, secret env) for a run."""

    def env_for(run):
        env = {"MODEL": model.base_model, "MODEL_LABEL": model.name}
        secret = {"ADAPTER_URL": adapter_url(model, run)}
        for secret_row in ProjectSecret.objects.filter(project=model.project, name__in=PASSED_SECRETS):
            secret[secret_row.name] = secret_row.value
        return env, secret

    return env_for


def benchmark_harnesses(model):
    """The project's harnesses this model's adapter runs on: GPU ones (vLLM) for PEFT, CPU ones with the local model (llama.cpp) for GGUF."""
    harnesses = Harness.objects.filter(project=model.project)
    if model.adapter_format == formats.GGUF:
        return harnesses.filter(compute_type=ComputeType.CPU, local_model=True)
    return harnesses.filter(compute_type=ComputeType.GPU)


def harness_kind(model) -> str:
    return "CPU harness with the local model" if model.adapter_format == formats.GGUF else "GPU harness"


def upload_model(form, project, user):
    """Store a model from a valid ModelUploadForm (the Models page and `POST /api/v1/models`)."""
    model = form.save(commit=False)
    model.project, model.created_by = project, user
    model.adapter_size = form.cleaned_data["adapter"].size
    model.save()
    return model


def delete_model(model):
    """The model and its adapter file; benchmark runs stay (they name the model, they do not point to it)."""
    adapter = model.adapter
    model.delete()
    # After the row: a failed delete must not leave a model without its file.
    transaction.on_commit(lambda: adapter.delete(save=False))


def run_benchmark(model, harness, user):
    """Start a run of `harness` (one of benchmark_harnesses(model)) for this model, charged at the harness's price."""
    return start_run(harness, user, env_for=benchmark_env(model))
