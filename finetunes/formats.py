"""Which adapters the Models page takes, and what each runs on.

- **PEFT** (a folder with `adapter_config.json` and the weights, as `peft`'s
  `save_pretrained` writes it): served by vLLM with `--enable-lora` on a GPU
  host (the lm-eval and MT-Bench presets).
- **GGUF LoRA** (one `.gguf` adapter, as llama.cpp's `convert_lora_to_gguf.py`
  writes it): of the platform's local model only, served with llama.cpp on a
  CPU host (the local-model preset); checked tensor by tensor against it here.

Anything else is refused on upload: a zip vLLM or llama.cpp would only refuse
after a sandbox started and the run was charged. So is an adapter that names
another base model than the one the upload says.
"""

import json
import tempfile
import zipfile
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

from belvedir.localmodel import adapters, files

PEFT, GGUF = "peft", "gguf"
CHOICES = [(PEFT, "PEFT, for vLLM on a GPU host"), (GGUF, "GGUF LoRA of the local model, on CPU")]
# Names a GGUF adapter's base may go by: the local model as served, or its Hugging Face id.
LOCAL_BASES = (files.MODEL_ID, f"HuggingFaceTB/{files.MODEL_ID}")
MAX_CONFIG_BYTES = 1 << 20


def adapter_format(upload, base_model: str) -> str:
    """PEFT or GGUF for a zip already checked by validate_adapter_zip; ValidationError saying why it is neither or does not fit `base_model`."""
    upload.seek(0)
    try:
        with zipfile.ZipFile(upload) as archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
            ggufs = [info for info in members if info.filename.lower().endswith(".gguf")]
            configs = [info for info in members if info.filename.rsplit("/", 1)[-1] == "adapter_config.json"]
            if len(ggufs) == 1 and not configs:
                _check_gguf(archive, ggufs[0], base_model)
                return GGUF
            if configs and not ggufs:
                _check_peft(archive, min(configs, key=lambda info: len(info.filename)), base_model)
                return PEFT
    finally:
        upload.seek(0)
    raise ValidationError(
        "The zip must hold a PEFT adapter (adapter_config.json and its weights, for vLLM on a GPU host) "
        f"or one GGUF LoRA adapter of the local model ({files.MODEL_ID}, on CPU); it holds {len(ggufs)} .gguf file(s) "
        f"and {len(configs)} adapter_config.json."
    )


def _check_peft(archive: zipfile.ZipFile, config: zipfile.ZipInfo, base_model: str):
    if config.file_size > MAX_CONFIG_BYTES:
        raise ValidationError(f"adapter_config.json is {config.file_size:,} bytes; a real one is a few hundred.")
    try:
        values = json.loads(archive.read(config))
    except (ValueError, RecursionError):
        raise ValidationError("adapter_config.json is not valid JSON.") from None
    named = values.get("base_model_name_or_path") if isinstance(values, dict) else None
    if isinstance(named, str) and named and named != base_model:
        raise ValidationError(f"This adapter was trained on {named} (adapter_config.json), not on {base_model}: nothing was stored.")


def _check_gguf(archive: zipfile.ZipFile, member: zipfile.ZipInfo, base_model: str):
    if base_model not in LOCAL_BASES:
        raise ValidationError(
            f"GGUF adapters run on CPU with the local model, so their base must be {files.MODEL_ID}; this one says {base_model}. "
            "For another base model, upload a PEFT adapter."
        )
    try:
        # Its tensors' shapes are what is checked; the digest is checked where it is run (harnesses/local_model.py).
        model = files.verify(files.model_path(settings.LOCAL_MODEL_DIR), digest=False)
    except files.ModelFileError as exc:
        raise ValidationError(f"The adapter cannot be checked: {exc}") from None
    # The reader maps the file, so it goes to a temporary file: no larger than an upload may be
    # (GGUF weights hardly compress), counted as it inflates, since a zip's stated sizes can lie.
    limit = settings.MODEL_ADAPTER_MAX_BYTES
    if member.file_size > limit:
        raise ValidationError(f"{member.filename} unpacks to {member.file_size / 1e6:.1f} MB; an adapter may be {limit / 1e6:.0f} MB.")
    with tempfile.TemporaryDirectory(prefix="bv-adapter-") as scratch:
        path = Path(scratch) / "adapter.gguf"
        written = 0
        with archive.open(member) as source, path.open("wb") as target:
            while chunk := source.read(1 << 20):
                written += len(chunk)
                if written > limit:
                    raise ValidationError(f"{member.filename} unpacks to more than {limit / 1e6:.0f} MB; an adapter may be no more.")
                target.write(chunk)
        try:
            adapters.check(path, model)
        except adapters.AdapterMismatch as exc:
            raise ValidationError(f"{exc} Nothing was stored.") from None
