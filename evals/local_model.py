"""The local model as a deployment: SmolLM2-135M-Instruct, served on this machine by `manage.py serve_local_model`.

A project without a deployment of its own can measure it in one click (the
quick-suite button on the home page and the eval form); `demo_setup`
registers it for the demo project. Its address is settings.LOCAL_MODEL_URL.
When that address is this machine's, its weights are checked here
(belvedir.localmodel.files.verify on settings.LOCAL_MODEL_DIR): the server
refuses to start without them, so a page says "not installed" once instead
of every eval on it failing row by row.
"""

import functools
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

from belvedir.localmodel import files

from .models import Deployment
from .validation import validate_deployment_url

NAME = "local SmolLM2-135M, CPU"
# The server generates one request at a time on the CPU; a few in flight keep
# it busy between requests, while more would only wait in its queue and use up
# their request timeout there (a gsm8k answer is up to 512 tokens).
MAX_IN_FLIGHT = 4
NOT_INSTALLED = f"local model not installed: {files.FIX}"
PRIVATE_REFUSED = (
    "The local model listens on this machine, and this installation refuses deployments on loopback and private addresses "
    "(BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS is off; `make run` turns it on): add a deployment of your own instead."
)
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}

# The quick suite on the local model: what gives a 135M model a real signal, within about five minutes on two cores.
# Multiple choice by log-likelihood (the model cannot refuse to answer), and gsm8k asked in the user turn, which the
# model answers rather than ending its turn at once. HellaSwag's long contexts take 0.9 s a row here, so 100 of them
# (bench/local_quick_suite.py: 358 s with 200, the rest as below).
QUICK_SUITE = [
    {"benchmark": "hellaswag", "sample_limit": 100, "mode": "loglikelihood", "options": {}},
    {"benchmark": "arc_challenge", "sample_limit": 200, "mode": "loglikelihood", "options": {}},
    {"benchmark": "winogrande", "sample_limit": 200, "mode": "loglikelihood", "options": {}},
    {"benchmark": "gsm8k", "sample_limit": 50, "mode": "generative", "options": {"instruction_in_user": True}},
]
# Every other catalog benchmark, and why the quick suite leaves it out (shown on the run's page).
QUICK_SUITE_LEAVES_OUT = {
    "mmlu": "57 subjects: a few rows of each say little, and all of them take longer than the quick suite's five minutes",
    "humaneval": "each answer runs in a sandbox, and a 135M model passes next to none",
    "mbpp": "each answer runs in a sandbox, and a 135M model passes next to none",
    "math500": "the model ends its turn at once under its prompt, so every score would be 0 of nothing",
    "ifbench": "the model ends its turn at once under its prompt, so every score would be 0 of nothing",
    "bfcl": "it calls tools, which the local model's server does not take",
    "mt_bench": "it needs a judge model, which this machine does not have",
}


def deployment_fields() -> dict:
    """What the project's local deployment holds: free (the tokens cost nothing), and chat, which every generative benchmark takes."""
    return {
        "base_url": settings.LOCAL_MODEL_URL,
        "model": files.MODEL_ID,
        "api_style": Deployment.Style.CHAT,
        "max_in_flight": MAX_IN_FLIGHT,
        "input_price_per_million": Decimal(0),
        "output_price_per_million": Decimal(0),
    }


def is_local(deployment: Deployment) -> bool:
    return deployment.model == files.MODEL_ID and deployment.base_url.rstrip("/") == settings.LOCAL_MODEL_URL.rstrip("/")


def deployment_problem(deployment: Deployment) -> str:
    """NOT_INSTALLED for a deployment of the local model whose weights are missing or changed, else ""."""
    return weights_problem() if is_local(deployment) else ""


def benchmark_problem(benchmark, deployment: Deployment) -> str:
    """Why the local model cannot run this benchmark, or "": its server takes no `tools`, so a benchmark calling them would only error row by row."""
    if benchmark.calls_tools and is_local(deployment):
        return (
            f"{benchmark.name} calls tools, which the local model's server does not take (SmolLM2-135M-Instruct is served without a tool-call "
            "format): measure function calling on a deployment of your own."
        )
    return ""


def weights_problem() -> str:
    """NOT_INSTALLED when the local model is served here and its pinned weights are not in place, else ""."""
    # Served elsewhere (another machine), its weights are that machine's: this one's var/models says nothing about them.
    if urlsplit(settings.LOCAL_MODEL_URL).hostname not in LOOPBACK_HOSTS:
        return ""
    path = files.model_path(settings.LOCAL_MODEL_DIR)
    try:
        stat = path.stat()
        identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    except OSError:
        identity = None
    return _verified(path, identity)


# verify() hashes the 98 MB file: 0.05-0.09 s measured on a 2-core dev machine,
# more than the rest of the home page, on every view of it. Keyed on the file's
# identity, a file installed, replaced or edited since is checked again.
@functools.lru_cache(maxsize=8)
def _verified(path: Path, identity) -> str:
    try:
        files.verify(path)
    except files.ModelFileError:
        return NOT_INSTALLED
    return ""


def refusal() -> str:
    """Why the quick-suite button cannot start on the local model here, or ""."""
    if problem := weights_problem():
        return problem
    try:
        validate_deployment_url(settings.LOCAL_MODEL_URL)
    except ValidationError:
        return PRIVATE_REFUSED
    return ""


def deployment_names(project) -> set[str]:
    """Up to two of the project's deployment names: enough to tell none, only the local one, or one of its own (names are unique)."""
    return set(Deployment.objects.filter(project=project).values_list("name", flat=True)[:2])


def offer(project, names: set[str] | None = None) -> dict | None:
    """What the quick-suite button shows the project: None when it has a deployment of its own (it measures that), else {"refused": why not, or ""}.

    `names`: deployment_names(project), when the caller read them already (the home page's checklist does).
    """
    if any(name != NAME for name in (deployment_names(project) if names is None else names)):
        return None
    return {"refused": refusal()}
