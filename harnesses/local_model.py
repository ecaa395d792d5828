"""What a harness with `local_model` set gets in its sandbox: the platform's local model and its runtime, read-only.

Nothing is fetched from the internet (a sandbox cannot): the GGUF weights
(checked against their pinned SHA-256), the `belvedir.localmodel` package
and the worker's own Python packages (llama.cpp's library, numpy, aiohttp)
are bind-mounted under /opt/belvedir, and the sandbox image's Python runs
them. That needs the worker's Python to be the image's minor version
(Debian bookworm's 3.11), as compiled packages are built for one.
`drivers/local-model/` serves base and adapter from them.
"""

import sysconfig
from pathlib import Path

from django.conf import settings

import belvedir.localmodel
from belvedir.localmodel import files
from belvedir.sandbox.spec import ReadOnlyMount

ROOT = "/opt/belvedir"
MODEL_FILE = f"{ROOT}/model/{files.FILENAME}"
PYTHONPATH = f"{ROOT}/app:{ROOT}/python"


def mounts() -> tuple[ReadOnlyMount, ...]:
    """files.ModelFileError (naming the fix) when the weights are not the pinned ones."""
    weights = files.verify(files.model_path(settings.LOCAL_MODEL_DIR))
    package = Path(belvedir.localmodel.__file__).parent
    return (
        ReadOnlyMount(str(weights), MODEL_FILE),
        # Only this package of the project, under a name of its own: the Python packages hold
        # the `belvedir` SDK, and the platform's settings and secrets stay out of the sandbox.
        ReadOnlyMount(str(package), f"{ROOT}/app/localmodel"),
        ReadOnlyMount(sysconfig.get_paths()["purelib"], f"{ROOT}/python"),
    )


def env() -> dict[str, str]:
    return {"BELVEDIR_LOCAL_MODEL": MODEL_FILE, "BELVEDIR_LOCAL_MODEL_ID": files.MODEL_ID, "BELVEDIR_LOCAL_PYTHONPATH": PYTHONPATH}


AGENT_HARNESS = "Reference agent on the local model"
AGENT_TASKS = "Create a file named hello.txt that contains the word hello. :: grep -qi hello hello.txt\n"
AGENT_ENV = {"LLM_MAX_TOKENS": "256", "LLM_TEMPERATURE": "0", "AGENT_MAX_STEPS": "5"}


def agent_harness(project, user):
    """The reference agent preset pointed at the local model server through the egress proxy, created the first time (demo_setup).

    A newcomer's first harness run: a real agent loop, a real model, a real
    trajectory in Traces, at no cost but CPU. SmolLM2-135M rarely calls the
    shell tool, so the task mostly fails; the trajectory shows why.
    """
    from .models import Harness, HarnessEnvVar, Preset

    preset = Preset.objects.filter(slug="reference-agent").first()
    if preset is None:
        return None
    harness, created = Harness.objects.get_or_create(
        project=project,
        name=AGENT_HARNESS,
        defaults=dict(
            created_by=user,
            preset=preset,
            repo_url=preset.resolved_repo_url,
            install_command=preset.install_command,
            run_command=preset.run_command,
            tasks=AGENT_TASKS,
            time_limit_seconds=600,
        ),
    )
    if created:
        env = {"LLM_BASE_URL": settings.LOCAL_MODEL_URL, "LLM_MODEL": files.MODEL_ID, "LLM_API_KEY": "", **AGENT_ENV}
        HarnessEnvVar.objects.bulk_create(HarnessEnvVar(harness=harness, name=name, value=value) for name, value in env.items())
    return harness
