"""Multiple-choice benchmarks in generative mode: the model replies in words, the letter is taken from them.

An answer is found the way people write one ("Answer: C", "The answer is
(C)", "**C**", "\\boxed{C}", a reply that is just "C.", or the text of
exactly one option); a reply none of these finds is wrong, never an error.
"""

import re

from .base import Benchmark, Row, Score, chat

LETTERS = "ABCDEFGHIJ"
INSTRUCTION = (
    "Answer the multiple-choice question. Think briefly if you need to, then end with a line 'Answer: X', where X is the letter of the correct option."
)
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


def _plain(text: str) -> str:
    return _SPACE.sub(" ", re.sub(r"[*_`]", "", text)).strip().lower().rstrip(".")


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
    plain = _plain(text)
    found = [i for i, option in enumerate(options) if (o := _plain(option)) and o in plain]
    found = [i for i in found if not any(j != i and _plain(options[i]) in _plain(options[j]) for j in found)]
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
    """Rows made by `choice_row`; scored on the extracted letter."""

    metric = "accuracy"
    generation = {"temperature": 0, "max_tokens": 1024}
    instruction = INSTRUCTION

    @property
    def prompt_format(self) -> str:
        return f"Zero-shot chat, generative: system {self.instruction!r}; user: the question, then its options as 'A. …' lines."

    def prompt(self, row):
        return chat(self.instruction, row.input)

    async def score(self, row, output, sandbox=None):
        letter = extract_choice(output, row["options"])
        return Score(float(letter == row.reference), letter or "")
