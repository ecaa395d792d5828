"""Log-likelihood mode: how likely a deployment finds each option, as lm-eval scores multiple choice, asked of its
server's /completions whatever the deployment's api_style (vLLM and the local model's server serve it beside
/chat/completions).

Each option is one /completions request: its context and continuation sent
as one prompt with `echo: true, logprobs: 1, max_tokens: 1`, as lm-eval's
`local-completions` model sends them. vLLM also takes `max_tokens: 0` (it
then echoes the prompt alone), but older vLLM and other servers refuse 0, so
one token is generated and left out; it costs one completion token a request.
The continuation's log-likelihood is the sum of the echoed prompt's
`token_logprobs` over the continuation's tokens, found from `text_offset`.

Where the continuation starts: a token belongs to it when the token ends
after the context does. A token that straddles the boundary (the context's
last characters and the continuation's first merged into one token) counts
for the continuation, whole: the continuation's first characters are only
ever scored through it, and leaving it out would score them not at all
(lm-eval, with a local tokenizer, counts the continuation's tokens as those
past the context's own token count, which can leave a straddled token out).
The boundary is measured back from the prompt's end, in the offsets' own
terms: vLLM echoes the BOS token ("<s>", "<|begin_of_text|>") as the first
token, and its text, which is not in the prompt, shifts every offset after it.

Pure (no HTTP, no ORM): the engine sends the request and hands the body here.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

NO_PROMPT_LOGPROBS = (
    "the deployment's /completions returned no prompt logprobs: log-likelihood mode needs a server that serves echo + logprobs, "
    "as vLLM and the local model's server do"
)
# Every request's generation settings: only the prompt's logprobs are read, the one token generated is left out.
MAX_TOKENS = 1


class Unusable(Exception):
    """A response that holds no log-likelihood of the continuation: a row error, never a wrong answer."""


@dataclass(frozen=True)
class Choice:
    """One option of a row, as one request: the prompt is context + continuation, and only the continuation is scored."""

    label: str
    context: str
    continuation: str


@dataclass(frozen=True)
class Loglikelihood:
    value: float
    # The continuation's tokens (summed), a straddling one included.
    tokens: int
    latency_ms: float | None  # None: answered by the response cache
    prompt_tokens: int | None
    completion_tokens: int | None


def payload(model: str, option: Choice) -> dict:
    return {"model": model, "prompt": option.context + option.continuation, "max_tokens": MAX_TOKENS, "temperature": 0, "echo": True, "logprobs": 1}


def parse(raw: bytes, option: Choice, latency_ms: float | None) -> Loglikelihood:
    try:
        body = orjson.loads(raw)
        choice = body["choices"][0]
    except (orjson.JSONDecodeError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise Unusable(f"Unexpected response shape: {exc}") from None
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    if not isinstance(logprobs, dict):
        raise Unusable(NO_PROMPT_LOGPROBS)
    tokens, values, offsets = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("text_offset")
    if not (isinstance(tokens, list) and isinstance(values, list) and isinstance(offsets, list) and len(tokens) == len(values) == len(offsets)):
        raise Unusable(NO_PROMPT_LOGPROBS)
    value, count = continuation_loglikelihood(tokens, values, offsets, _prompt_token_count(usage, len(tokens)), len(option.continuation))
    return Loglikelihood(value, count, latency_ms, usage.get("prompt_tokens"), usage.get("completion_tokens"))


def _prompt_token_count(usage: dict, echoed: int) -> int:
    """How many of the echoed tokens are the prompt's: usage says so; without it, all but the one generated."""
    counted = usage.get("prompt_tokens")
    if isinstance(counted, int) and 0 < counted <= echoed:
        return counted
    return echoed - MAX_TOKENS


def continuation_loglikelihood(
    tokens: Sequence[str], values: Sequence, offsets: Sequence[int], prompt_tokens: int, continuation_chars: int
) -> tuple[float, int]:
    """The sum of the continuation's token logprobs, and how many tokens it took: the arithmetic of the module docstring.

    `tokens`, `values` (token_logprobs) and `offsets` (text_offset) are the
    echoed lists; their first `prompt_tokens` entries are the prompt's.
    """
    # One token is no echo at all (a server that ignored `echo` returns only the generated one), and the first
    # token has no logprob (nothing comes before it): a continuation needs a token after it.
    if prompt_tokens < 2:
        raise Unusable(NO_PROMPT_LOGPROBS)
    try:
        end = offsets[prompt_tokens - 1] + len(tokens[prompt_tokens - 1])
        ends = [*offsets[1:prompt_tokens], end]
        boundary = end - continuation_chars
        first = next(i for i, token_end in enumerate(ends) if token_end > boundary)
    except (TypeError, StopIteration):
        raise Unusable(NO_PROMPT_LOGPROBS) from None
    if first == 0:
        raise Unusable("the deployment's echoed tokens do not cover the continuation after a first token: its text_offset does not match the prompt")
    scored = values[first:prompt_tokens]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in scored):
        raise Unusable(NO_PROMPT_LOGPROBS)
    return float(sum(scored)), len(scored)


def likeliest(loglikelihoods: Sequence[float], lengths: Sequence[int] | None = None) -> int:
    """The index of the likeliest option (the first of a tie, as numpy's argmax); with lengths, per character (lm-eval's acc_norm)."""
    scores = list(loglikelihoods) if lengths is None else [ll / max(n, 1) for ll, n in zip(loglikelihoods, lengths, strict=True)]
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def summary(options: Sequence[Choice], loglikelihoods: Sequence[Loglikelihood]) -> str:
    """The sample's output: each option's log-likelihood and token count, one a line."""
    return "\n".join(f"{o.label}: {r.value:.4f} ({r.tokens} tokens)" for o, r in zip(options, loglikelihoods, strict=True))
