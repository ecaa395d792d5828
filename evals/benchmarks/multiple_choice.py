"""Multiple-choice benchmarks, in two modes.

Generative (chat deployments): the model replies in words, the letter is
taken from them. An answer is found the way people write one ("Answer: C",
"The answer is (C)", "**C**", "\\boxed{C}", a reply that is just "C.", or the
text of exactly one option); a reply none of these finds is wrong, never an
error.

Log-likelihood (completions deployments that echo prompt logprobs, as vLLM
serves base and fine-tuned models): each option is a continuation of the
benchmark's lm-eval prompt, and the option the model finds likeliest is the
answer, as lm-eval scores it: `acc` by the sum of the continuation's
logprobs, `acc_norm` by that sum per character of the option (lm-eval's
`len(choice)`, without the space before it). Each benchmark reports the
metrics lm-eval reports for it, its headline first.
"""

import re

from ..loglikelihood import likeliest
from .base import GENERATIVE, LOGLIKELIHOOD, Benchmark, Choice, Row, Score, chat

LETTERS = "ABCDEFGHIJ"
INSTRUCTION = (
    "Answer the multiple-choice question. Think briefly if you need to, then end with a line 'Answer: X', where X is the letter of the correct option."
)
# lm-eval's target_delimiter: the continuation is the option after one space.
DELIMITER = " "
# Strongest first; the last match of the first pattern that matches is the answer.
# Letters are matched in capitals only: "a" and "I" are words of prose.
_PATTERNS = [
    re.compile(r"(?i:answer)(?:\s+(?i:is))?\s*(?i:option)?\s*[:：\-]?\s*[(\[*]*\s*([A-J])(?![A-Za-z0-9])"),
    re.compile(r"\\boxed\{\s*(?:\\text(?:bf)?\{)?\s*([A-J])\s*\}"),
    re.compile(r"\*\*\s*\(?([A-J])\)?\s*[.:)]?\s*\*\*"),
    re.compile(r"^\s*\(?([A-J])\s*(?:[.:)]|$)", re.MULTILINE),
    re.compile(r"\(([A-J])\)"),
]
_SPACE = re.compile(r"\s+")
_MARKUP = re.compile(r"[*_`]")


def _plain(text: str) -> str:
    return _SPACE.sub(" ", _MARKUP.sub("", text)).strip().lower().rstrip(".")


def extract_choice(output: str, options: list[str]) -> str | None:
    """The letter of the option the output picks, or None when it picks none clearly."""
    valid = LETTERS[: len(options)]
    text = output or ""
    for pattern in _PATTERNS:
        letters = [m for m in pattern.findall(text) if m in valid]
        if letters:
            return letters[-1]
    # The option written out: only when exactly one option's text is there
    # (the longest wins over one it contains, as "Maria" over "Mari").
    plain, plains = _plain(text), [_plain(option) for option in options]
    found = [i for i, o in enumerate(plains) if o and o in plain]
    found = [i for i in found if not any(j != i and plains[i] in plains[j] for j in found)]
    return valid[found[0]] if len(found) == 1 else None


def format_question(question: str, options: list[str]) -> str:
    return question.strip() + "\n\n" + "\n".join(f"{letter}. {option}" for letter, option in zip(LETTERS, options, strict=False))


def choice_row(id: str, question: str, options: list[str], answer: int, categories=None, **extra) -> Row:
    return Row(
        id=id,
        input=format_question(question, options),
        reference=LETTERS[answer],
        categories=categories or {},
        extra={"options": list(options), **extra},
    )


class MultipleChoice(Benchmark):
    """Rows made by `choice_row`; scored on the extracted letter, or on the options' log-likelihoods."""

    metric = "accuracy"
    generation = {"temperature": 0, "max_tokens": 1024}
    instruction = INSTRUCTION
    modes = (GENERATIVE, LOGLIKELIHOOD)
    # Log-likelihood mode, as lm-eval runs the task: its prompt, and its metrics with the conventional headline first.
    loglikelihood_format: str
    loglikelihood_metrics: tuple[str, ...] = ("acc",)

    @property
    def prompt_format(self) -> str:
        return f"Zero-shot chat, generative: system {self.instruction!r}; user: the question, then its options as 'A. …' lines."

    def prompt(self, row):
        return chat(self.instruction, row.input)

    async def score(self, row, output, sandbox=None):
        letter = extract_choice(output, row["options"])
        return Score(float(letter == row.reference), letter or "")

    def loglikelihood(self):
        return {"prompt_format": self.loglikelihood_format, "metrics": list(self.loglikelihood_metrics), "headline": self.loglikelihood_metrics[0]}

    def score_loglikelihoods(self, row, loglikelihoods):
        options = self.choices(row)
        lengths = [len(o.continuation.removeprefix(DELIMITER)) for o in options]
        picks = {"acc": likeliest(loglikelihoods), "acc_norm": likeliest(loglikelihoods, lengths)}
        metrics = {name: float(LETTERS[picks[name]] == row.reference) for name in self.loglikelihood_metrics}
        choices = [{"option": o.label, "loglikelihood": ll, "chars": n} for o, ll, n in zip(options, loglikelihoods, lengths, strict=True)]
        headline = self.loglikelihood_metrics[0]
        return Score(metrics[headline], LETTERS[picks[headline]], detail={**metrics, "choices": choices})


def option(label: str, context: str, text: str) -> Choice:
    """An option as lm-eval sends it: the continuation is its text after the target delimiter."""
    return Choice(label, context, DELIMITER + text)
