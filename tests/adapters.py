"""Real LoRA adapters of the local model (SmolLM2-135M-Instruct), written with the `gguf` package as llama.cpp's converter writes them.

`letter_adapter` raises one answer letter after lm-eval's MMLU prompt
("…Answer:" then " A", " B"…). It is a rank-1 LoRA on the last block's
attention output projection: B is the direction the output layer reads as
that letter rather than the others (its embedding less the four letters'
mean, through the final norm's weights), A a fixed random direction of the
attention output. Seed, sign and alpha were chosen by measuring on other
questions than the tests': with them the model answers the letter on all of
them, while the base model (this prompt, greedy) answers A.
"""

import io
import zipfile
from pathlib import Path

import gguf
import numpy as np
from gguf.quants import dequantize

TARGET = "blk.29.attn_output.weight"
LETTER_TOKENS = {"A": 330, "B": 389, "C": 340, "D": 422}  # " A"… in SmolLM2's vocabulary
SEED, SIGN, ALPHA = 0, -1.0, 64.0


def _weights(model: Path, *names: str) -> list[np.ndarray]:
    tensors = {tensor.name: tensor for tensor in gguf.GGUFReader(model).tensors}
    return [dequantize(tensors[n].data, tensors[n].tensor_type).reshape([int(x) for x in reversed(tensors[n].shape)]) for n in names]


def write_adapter(path: Path, tensors: dict[str, np.ndarray], *, alpha: float = ALPHA, kind: str = "adapter", architecture: str = "llama") -> Path:
    writer = gguf.GGUFWriter(path, arch=architecture)
    writer.add_type(kind)
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", alpha)
    for name, values in tensors.items():
        writer.add_tensor(name, values.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def letter_adapter(model: Path, path: Path, letter: str = "C") -> Path:
    embeddings, norm = _weights(model, "token_embd.weight", "output_norm.weight")
    letters = embeddings[list(LETTER_TOKENS.values())]
    direction = (embeddings[LETTER_TOKENS[letter]] - letters.mean(axis=0)) / norm.reshape(-1)
    a = np.random.default_rng(SEED).standard_normal(direction.size)
    # numpy's (rank, in) and (out, rank) are ggml's (in, rank) and (rank, out): llama.cpp's lora_a and lora_b.
    return write_adapter(
        path,
        {f"{TARGET}.lora_a": (SIGN * a / np.linalg.norm(a)).reshape(1, -1), f"{TARGET}.lora_b": (direction / np.linalg.norm(direction)).reshape(-1, 1)},
    )


def zipped(*files: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for file in files:
            archive.write(file, f"adapter/{file.name}")
    return buffer.getvalue()
