"""llama.cpp running the model, one sequence at a time, through ik-llama-cpp-python's ctypes API.

Only this module imports ik_llama_cpp. Its high-level `IkLlama` samples
with llama.cpp's own sampler (~40 tokens/s on 2 cores, no seed, no
logprobs); here the logits are read with numpy instead: argmax for
temperature 0 (~90 tokens/s, byte-identical across processes on one
machine), a seeded numpy Generator over softmax(logits / T) otherwise, and
log-softmax rows for logprobs. Not thread-safe (llama.cpp's context is
not): the server calls it from one thread.

The KV cache is cleared for every request rather than reusing a common
prefix: a prompt evaluated in different batch splits can give logits that
differ in the last bits, and temperature 0 must give the same text whatever
came before it. A 500-token prompt costs ~40 ms to evaluate again.
"""

import codecs
import ctypes
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from ik_llama_cpp import _ctypes_api as C

# Prompts are evaluated in chunks of this many tokens: with logits for every
# position (echo + logprobs) a chunk's output is CHUNK x 49,152 floats, 100 MB.
CHUNK = 512
# Rows of log-softmax computed at once, to bound the temporaries (64 x 49,152 doubles, 25 MB).
ROWS = 64
GGML_LOG_LEVEL_ERROR = 4
CHATML = b"chatml"


def _bind(name: str, argtypes: list, restype):
    # libllama.so functions the package's bindings leave out, bound as it binds its own.
    function = getattr(C._lib, name)
    function.argtypes = argtypes
    function.restype = restype
    return function


class _ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


_LogCallback = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_log_set = _bind("llama_log_set", [_LogCallback, ctypes.c_void_p], None)
_model_chat_template = _bind("llama_model_chat_template", [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_char_p)
_chat_apply_template = _bind(
    "llama_chat_apply_template",
    [ctypes.c_char_p, ctypes.POINTER(_ChatMessage), ctypes.c_size_t, ctypes.c_bool, ctypes.c_char_p, ctypes.c_int32],
    ctypes.c_int32,
)
_add_bos_token = _bind("llama_add_bos_token", [ctypes.c_void_p], ctypes.c_int32)
_get_logits = _bind("llama_get_logits", [ctypes.c_void_p], ctypes.POINTER(ctypes.c_float))
_n_ctx = _bind("llama_n_ctx", [ctypes.c_void_p], ctypes.c_uint32)
_kv_cache_clear = C.llama_kv_cache_clear
_adapter_init = _bind("llama_lora_adapter_init", [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_void_p)
_adapter_set = _bind("llama_lora_adapter_set", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float], ctypes.c_int32)
_adapter_clear = _bind("llama_lora_adapter_clear", [ctypes.c_void_p], None)
_adapter_free = _bind("llama_lora_adapter_free", [ctypes.c_void_p], None)
supports_gpu_offload = _bind("llama_supports_gpu_offload", [], ctypes.c_bool)


@_LogCallback
def _log(level, text, user_data):
    # llama.cpp logs every tensor and buffer at load (~100 lines), and on a CPU-only build warns
    # of "0 MiB free on device 0" for a GPU it does not have: a server's output keeps the errors.
    if level == GGML_LOG_LEVEL_ERROR and text:
        sys.stderr.write(text.decode("utf-8", "replace"))


class ContextLengthExceeded(ValueError):
    def __init__(self, prompt_tokens: int, max_tokens: int, n_ctx: int):
        self.prompt_tokens, self.max_tokens, self.n_ctx = prompt_tokens, max_tokens, n_ctx
        super().__init__(
            f"This model's maximum context length is {n_ctx} tokens. However, you requested {prompt_tokens + max_tokens} tokens "
            f"({prompt_tokens} in the prompt, {max_tokens} for the completion). Please reduce the prompt or the completion length."
        )


class AdapterError(RuntimeError):
    pass


class EmptyPrompt(ValueError):
    def __init__(self):
        super().__init__("The prompt is empty: it has no token to evaluate.")


@dataclass(frozen=True)
class Sampling:
    max_tokens: int | None = None  # None: until the context is full
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: int | None = None  # alternatives per generated token; None: no logprobs at all


@dataclass(frozen=True)
class Token:
    id: int
    # The characters this token completes: a token ending inside a UTF-8 character has
    # none and the next one has it, so a sequence's tokens concatenate to its text.
    text: str
    piece: bytes
    logprob: float | None = None
    top: tuple[tuple[str, float], ...] | None = None


@dataclass(frozen=True)
class Prompt:
    """Generation's first event: the prompt is evaluated (a request that fails, fails before it)."""

    tokens: tuple[Token, ...]


@dataclass(frozen=True)
class Delta:
    text: str
    tokens: tuple[Token, ...]


@dataclass(frozen=True)
class Finish:
    reason: str  # "stop": end of turn or a stop string; "length": max_tokens or the context's end
    completion_tokens: int


class Runtime:
    def __init__(self, path: Path, *, n_ctx: int = 0, n_threads: int | None = None, n_gpu_layers: int = 0, adapter: Path | None = None):
        """`n_ctx` 0: the context the model was trained with (8,192 tokens for SmolLM2), as vLLM's max_model_len defaults to it.

        `adapter`: a LoRA adapter in GGUF, loaded beside the model; each `generate` says whether it applies.
        """
        _log_set(_log, None)
        C.llama_backend_init()
        model_params = C.llama_model_default_params()
        model_params.n_gpu_layers = n_gpu_layers
        self._model = C.llama_model_load_from_file(str(path).encode(), model_params)
        if not self._model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.n_vocab = C.llama_vocab_n_tokens(C.llama_model_get_vocab(self._model))
        self.n_threads = n_threads or os.cpu_count() or 1
        params = C.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = CHUNK
        params.n_threads = params.n_threads_batch = self.n_threads
        # ik_llama.cpp's flash attention asserts on long prompts on CPUs without AVX-VNNI (the
        # package turns it off there); off everywhere, so every machine computes the same way.
        params.flash_attn = False
        self._ctx = C.llama_init_from_model(self._model, params)
        if not self._ctx:
            C.llama_free_model(self._model)
            raise RuntimeError("llama.cpp could not create a context")
        self.n_ctx = _n_ctx(self._ctx)
        self._batch = C.llama_batch_init(CHUNK, 0, 1)
        self._add_bos = _add_bos_token(self._model) == 1
        # The GGUF's own template (SmolLM2's is ChatML) as llama.cpp applies it: by pattern, not as Jinja.
        self.chat_template = _model_chat_template(self._model, None) or CHATML
        self._pieces: dict[tuple[int, bool], bytes] = {}
        self._adapter = self._adapter_on = None
        if adapter is not None:
            # llama.cpp checks every tensor against the model's (name and shape) and logs why it refuses.
            self._adapter = _adapter_init(self._model, str(adapter).encode())
            if not self._adapter:
                self.close()
                raise AdapterError(f"llama.cpp could not load the adapter {adapter}: not a GGUF LoRA adapter of this model (see the error above).")

    def _use_adapter(self, on: bool):
        if on and self._adapter is None:
            raise AdapterError("No adapter is loaded.")
        if on != bool(self._adapter_on):
            if on:
                _adapter_set(self._ctx, self._adapter, 1.0)
            else:
                _adapter_clear(self._ctx)
            self._adapter_on = on

    def close(self):
        if self._adapter:
            _adapter_free(self._adapter)
            self._adapter = None
        if self._ctx:
            C.llama_batch_free(self._batch)
            C.llama_free(self._ctx)
            C.llama_free_model(self._model)
            self._ctx = self._model = None

    def tokenize(self, text: str) -> list[int]:
        """Special tokens in the text (`<|im_start|>`) are parsed as such, as llama.cpp's server does."""
        data = text.encode()
        needed = -C.llama_tokenize(self._model, data, len(data), None, 0, self._add_bos, True)
        if needed <= 0:
            return []
        tokens = (C.llama_token * needed)()
        count = C.llama_tokenize(self._model, data, len(data), tokens, needed, self._add_bos, True)
        return list(tokens[:count])

    def piece(self, token: int, *, special: bool = True) -> bytes:
        key = (token, special)
        if (found := self._pieces.get(key)) is None:
            buffer = ctypes.create_string_buffer(64)
            size = C.llama_token_to_piece(self._model, token, buffer, 64, 0, special)
            if size < 0:
                buffer = ctypes.create_string_buffer(-size)
                size = C.llama_token_to_piece(self._model, token, buffer, -size, 0, special)
            found = self._pieces[key] = buffer.raw[:size]
        return found

    def detokenize(self, tokens: list[int]) -> str:
        return b"".join(self.piece(token) for token in tokens).decode("utf-8", "replace")

    def chat_prompt(self, messages: list[tuple[str, str]]) -> str:
        """The conversation in the model's chat template, ending where the assistant's turn begins."""
        array = (_ChatMessage * len(messages))(*((role.encode(), content.encode()) for role, content in messages))
        template = self.chat_template
        size = _chat_apply_template(template, array, len(messages), True, None, 0)
        if size < 0:
            # A template llama.cpp does not recognise: ChatML, which SmolLM2 was trained on.
            template = CHATML
            size = _chat_apply_template(template, array, len(messages), True, None, 0)
        buffer = ctypes.create_string_buffer(size + 1)
        _chat_apply_template(template, array, len(messages), True, buffer, size + 1)
        return buffer.raw[:size].decode("utf-8", "replace")

    def generate(
        self,
        prompt: list[int],
        sampling: Sampling,
        *,
        prompt_logprobs: int | None = None,
        logprob_end: bool = False,
        adapter: bool = False,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Iterator[Prompt | Delta | Finish]:
        """Evaluate the prompt, then sample until end of turn, a stop string, max_tokens or the context's end.

        Yields the Prompt (with each prompt token's logprob given its prefix when
        `prompt_logprobs` is set, the first None), Deltas of final text, then one Finish.
        With `logprob_end` and logprobs asked for, an end-of-turn token comes last as a
        Delta of no text with its logprob, as vLLM's completions list it: lm-eval reads
        a log-likelihood as token_logprobs[ctxlen:-1], the last entry taken for the one
        generated token, and without it cut the prompt's last token instead.
        With `adapter`, the LoRA adapter loaded with the model applies; without, the base model answers.
        """
        if not prompt:
            raise EmptyPrompt()
        room = self.n_ctx - len(prompt)
        max_tokens = max(room, 0) if sampling.max_tokens is None else sampling.max_tokens
        if room < 0 or max_tokens > room:
            raise ContextLengthExceeded(len(prompt), max_tokens, self.n_ctx)
        self._use_adapter(adapter)
        _kv_cache_clear(self._ctx)
        yield Prompt(self._evaluate_prompt(prompt, prompt_logprobs))
        rng = np.random.default_rng(sampling.seed)
        text = _StopText(sampling.stop)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        count, position, end = 0, len(prompt), None
        while count < max_tokens:
            if cancelled():
                return
            logits = np.ctypeslib.as_array(C.llama_get_logits_ith(self._ctx, -1), shape=(self.n_vocab,))
            token = _choose(logits, sampling, rng)
            if C.llama_token_is_eog(self._model, token):
                if logprob_end and sampling.logprobs is not None:
                    end = Token(token, "", b"", *_token_logprobs(logits, token, sampling.logprobs, self._top_text))
                break
            count += 1
            piece = self.piece(token, special=False)
            logprob, top = _token_logprobs(logits, token, sampling.logprobs, self._top_text) if sampling.logprobs is not None else (None, None)
            delta, stopped = text.add(Token(token, decoder.decode(piece), piece, logprob, top))
            if delta:
                yield delta
            if stopped:
                yield Finish("stop", count)
                return
            if count == max_tokens:
                break
            self._decode([token], position, outputs="last")
            position += 1
        if delta := text.flush(decoder.decode(b"", final=True)):
            yield delta
        if end is not None:
            yield Delta("", (end,))
        yield Finish("length" if count == max_tokens else "stop", count)

    def _evaluate_prompt(self, prompt: list[int], top: int | None) -> tuple[Token, ...]:
        logprobs: list[tuple[float | None, tuple | None]] = [(None, None)]
        for start in range(0, len(prompt), CHUNK):
            chunk = prompt[start : start + CHUNK]
            last = start + len(chunk) == len(prompt)
            self._decode(chunk, start, outputs="all" if top is not None else ("last" if last else "none"))
            if top is None:
                continue
            rows = np.ctypeslib.as_array(_get_logits(self._ctx), shape=(len(chunk), self.n_vocab))
            # Row i predicts token i + 1; the prompt's last row predicts the completion.
            predicted = prompt[start + 1 : start + len(chunk) + 1]
            for first in range(0, len(predicted), ROWS):
                block = rows[first : first + ROWS][: len(predicted) - first]
                logprobs.extend(_rows_logprobs(block, predicted[first : first + ROWS], top, self._top_text))
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        tokens = []
        for index, token in enumerate(prompt):
            piece = self.piece(token)
            text = decoder.decode(piece, final=index == len(prompt) - 1)
            logprob, alternatives = logprobs[index] if top is not None else (None, None)
            tokens.append(Token(token, text, piece, logprob, alternatives))
        return tuple(tokens)

    def _top_text(self, token: int) -> str:
        # An alternative stands alone: its bytes decoded on their own (a partial character shows as U+FFFD).
        return self.piece(token).decode("utf-8", "replace")

    def _decode(self, tokens: list[int], position: int, *, outputs: str):
        batch = self._batch
        batch.n_tokens = len(tokens)
        for index, token in enumerate(tokens):
            batch.token[index] = token
            batch.pos[index] = position + index
            batch.n_seq_id[index] = 1
            batch.seq_id[index][0] = 0
            batch.logits[index] = outputs == "all" or (outputs == "last" and index == len(tokens) - 1)
        if (status := C.llama_decode(self._ctx, batch)) != 0:
            raise RuntimeError(f"llama_decode failed ({status}) at position {position}")


def _choose(logits: np.ndarray, sampling: Sampling, rng: np.random.Generator) -> int:
    if sampling.temperature == 0:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / sampling.temperature
    probabilities = np.exp(scaled - scaled.max())
    candidates = None
    if sampling.top_p < 1:
        # The smallest set of most likely tokens whose mass reaches top_p (a stable sort: ties in a fixed order).
        order = np.argsort(-probabilities, kind="stable")
        mass = np.cumsum(probabilities[order])
        candidates = order[: int(np.searchsorted(mass, sampling.top_p * mass[-1])) + 1]
        probabilities = probabilities[candidates]
    cumulative = np.cumsum(probabilities)
    index = min(int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")), len(cumulative) - 1)
    return int(candidates[index]) if candidates is not None else index


def _log_softmax(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float64)
    peak = rows.max(axis=-1, keepdims=True)
    return rows - (peak + np.log(np.exp(rows - peak).sum(axis=-1, keepdims=True)))


def _rows_logprobs(rows: np.ndarray, tokens: list[int], top: int, text_of) -> list[tuple[float, tuple]]:
    logp = _log_softmax(rows)
    chosen = logp[np.arange(len(tokens)), tokens]
    return [(float(value), _alternatives(row, token, top, text_of)) for row, token, value in zip(logp, tokens, chosen, strict=True)]


def _token_logprobs(logits: np.ndarray, token: int, top: int, text_of) -> tuple[float, tuple]:
    logp = _log_softmax(logits)
    return float(logp[token]), _alternatives(logp, token, top, text_of)


def _alternatives(logp: np.ndarray, token: int, top: int, text_of) -> tuple[tuple[str, float], ...]:
    """The `top` most likely tokens, most likely first, and the chosen one (OpenAI: up to top + 1)."""
    if top <= 0:
        ids = []
    else:
        ids = np.argpartition(-logp, top - 1)[:top]
        ids = ids[np.argsort(-logp[ids], kind="stable")].tolist()
    if token not in ids:
        ids.append(token)
    return tuple((text_of(i), float(logp[i])) for i in ids)


class _StopText:
    """Generated text, released once final: a tail that may be the start of a stop string waits until it cannot be."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops = tuple(stop for stop in stops if stop)
        self.text = ""
        self.sent = 0
        self.pending: list[tuple[int, Token]] = []  # tokens not yet released, with their start in text

    def add(self, token: Token) -> tuple[Delta | None, bool]:
        self.pending.append((len(self.text), token))
        self.text += token.text
        found = [at for stop in self.stops if (at := self.text.find(stop, self.sent)) >= 0]
        if found:
            return self._release(min(found), cut=True), True
        held = max((k for stop in self.stops for k in range(min(len(stop) - 1, len(self.text) - self.sent), 0, -1) if self.text.endswith(stop[:k])), default=0)
        return self._release(len(self.text) - held, cut=False), False

    def flush(self, tail: str) -> Delta | None:
        self.text += tail
        return self._release(len(self.text), cut=False, everything=True)

    def _release(self, end: int, *, cut: bool, everything: bool = False) -> Delta | None:
        # Tokens go out with their text: each once its text is all out; at a stop, those that began before it.
        if cut:
            tokens = [token for start, token in self.pending if start < end]
            self.pending = []
        else:
            tokens = [token for start, token in self.pending if everything or start + len(token.text) <= end]
            self.pending = [] if everything else [(start, token) for start, token in self.pending if start + len(token.text) > end]
        text, self.sent = self.text[self.sent : end], max(end, self.sent)
        return Delta(text, tuple(tokens)) if text or tokens else None
