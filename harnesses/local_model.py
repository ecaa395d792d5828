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
