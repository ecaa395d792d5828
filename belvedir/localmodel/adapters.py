"""LoRA adapters in GGUF (llama.cpp's format, as `convert_lora_to_gguf.py` writes them), checked against the model they claim to adapt.

llama.cpp refuses a mismatched adapter too, but only once a sandbox has
started and a run been charged; this reads the headers (the `gguf`
package, ggml's own reader: tensor data is memory-mapped, never read) so
the Models page can refuse it on upload.
"""

import functools
from dataclasses import dataclass
from pathlib import Path

import gguf

SUFFIXES = (".lora_a", ".lora_b")


class AdapterMismatch(ValueError):
    pass


@dataclass(frozen=True)
class Header:
    kind: str  # general.type: "adapter" or "model"
    adapter_type: str
    architecture: str
    shapes: dict[str, tuple[int, ...]]  # tensor name -> ggml shape (ne0 first)


def read_header(path: Path) -> Header:
    try:
        reader = gguf.GGUFReader(path)
    except Exception as exc:  # the reader raises ValueError, KeyError, struct and numpy errors on damaged files
        raise AdapterMismatch(f"{path.name} is not a readable GGUF file ({type(exc).__name__}).") from None

    def text(key: str) -> str:
        field = reader.fields.get(key)
        value = field.contents() if field is not None else None
        return value if isinstance(value, str) else ""

    shapes = {tensor.name: tuple(int(n) for n in tensor.shape) for tensor in reader.tensors}
    return Header(text("general.type") or "model", text("adapter.type"), text("general.architecture"), shapes)


@functools.lru_cache(maxsize=4)
def _model_header(path: str, mtime_ns: int, size: int) -> Header:
    # 2.5 s for SmolLM2 (the reader parses its 49,152-token vocabulary): once per process and file version.
    return read_header(Path(path))


def check(adapter: Path, model: Path):
    """Raise AdapterMismatch, saying why, unless `adapter` is a LoRA adapter that llama.cpp can apply to `model`."""
    stat = model.stat()
    found, base = read_header(adapter), _model_header(str(model), stat.st_mtime_ns, stat.st_size)
    if found.kind != "adapter" or found.adapter_type != "lora":
        raise AdapterMismatch(f"{adapter.name} is a GGUF {found.kind}, not a LoRA adapter (general.type must be 'adapter', adapter.type 'lora').")
    if found.architecture != base.architecture:
        raise AdapterMismatch(f"{adapter.name} adapts a {found.architecture or 'unnamed'} model; the base model is {base.architecture}.")
    pairs: dict[str, dict[str, tuple[int, ...]]] = {}
    for name, shape in found.shapes.items():
        target, _, part = name.rpartition(".")
        if "." + part not in SUFFIXES:
            raise AdapterMismatch(f"{adapter.name} holds {name}, which is neither a lora_a nor a lora_b tensor.")
        pairs.setdefault(target, {})[part] = shape
    if not pairs:
        raise AdapterMismatch(f"{adapter.name} holds no LoRA tensors.")
    for target, parts in sorted(pairs.items()):
        if set(parts) != {"lora_a", "lora_b"}:
            raise AdapterMismatch(f"{adapter.name}: {target} has a lora_a or a lora_b, not both.")
        weight = base.shapes.get(target)
        if weight is None:
            raise AdapterMismatch(f"{adapter.name} adapts {target}, which the base model does not have: it was made for another model.")
        a, b = parts["lora_a"], parts["lora_b"]
        # ggml's order (columns first), as llama.cpp checks: A is (in, rank), B is (rank, out).
        if len(a) != 2 or len(b) != 2 or a[0] != weight[0] or b[1] != weight[1] or a[1] != b[0]:
            raise AdapterMismatch(
                f"{adapter.name}: {target} is {weight[0]}×{weight[1]} in the base model, but the adapter's A is {'×'.join(map(str, a))} "
                f"and B {'×'.join(map(str, b))}: it was made for another model."
            )
