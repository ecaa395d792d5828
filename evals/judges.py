"""LLM judges: a deployment asked to grade an answer with a named, versioned prompt.

One machinery for every judged score: MT-Bench's 1-10 ratings
(benchmarks/mt_bench.py) and the dataset evals' llm_judge scorer
(datasets.py). A judge is identified by its deployment, its prompt and the
prompt's version (`Judge.key`), which is what a calibration card collects
labels under (calibration.py): the same model with a reworded rubric is
another judge.

A judge that answers but cannot be parsed, or cannot be reached, makes the
sample an error (ScoringError), never a zero: a zero would be a verdict
nobody gave. Its tokens count all the same (`Usage` on the error).
"""

import re
from dataclasses import dataclass

from .engine import RequestFailed, complete, http_session
from .models import Deployment
from .scoring import ScoringError, Usage

# How a judge grades: greedy and long enough for its explanation (FastChat's gen_judgment: temperature 0, 2048 tokens).
JUDGE_GENERATION = {"temperature": 0, "max_tokens": 2048}


class JudgeUnusable(ScoringError):
    """The judge could not be asked, or its answer holds no grade; the sample is an error and is retried, never scored 0."""


@dataclass(frozen=True)
class Verdict:
    value: float
    reasoning: str
    usage: Usage


@dataclass(frozen=True)
class Rubric:
    """A judge's prompt family: its name and version (part of the judge's identity) and the scale it grades on."""

    name: str
    version: str
    scale: tuple[float, float]


class Judge:
    """A deployment grading with one rubric; opens its HTTP session on first use (inside the engine's loop)."""

    def __init__(self, deployment: Deployment, rubric: Rubric):
        self.deployment = deployment
        self.rubric = rubric
        self._client = None

    @property
    def key(self) -> str:
        return judge_key(self.deployment.pk, self.rubric)

    async def grade(self, messages: list[dict], parse, generation: dict | None = None) -> Verdict:
        """The judge's verdict on `messages`: `parse(text)` gives the grade, or None when the text holds none."""
        if self._client is None:
            self._client = http_session(self.deployment.max_in_flight)
        try:
            reply = await complete(self._client, self.deployment, messages, generation or JUDGE_GENERATION)
        except RequestFailed as exc:
            raise JudgeUnusable(f"The judge ({self.deployment.name}) could not be asked: {exc}") from None
        usage = Usage(reply.prompt_tokens or 0, reply.completion_tokens or 0)
        value = parse(reply.text)
        if value is None:
            raise JudgeUnusable(f"The judge ({self.deployment.name}) answered without a grade this rubric can read: {reply.text[:300]!r}", usage=usage)
        return Verdict(value, reply.text, usage)

    async def aclose(self):
        if self._client is not None:
            await self._client.close()
            self._client = None


def judge_key(deployment_id: int, rubric: Rubric) -> str:
    return f"{deployment_id}:{rubric.name}@{rubric.version}"


# FastChat's patterns: "[[8]]", or failing that "[8]"; a rating outside 1-10 is no rating.
DOUBLE_BRACKETS = re.compile(r"\[\[(\d+\.?\d*)\]\]")
SINGLE_BRACKETS = re.compile(r"\[(\d+\.?\d*)\]")


def rating_1_to_10(text: str) -> float | None:
    """MT-Bench's single-answer grade, as FastChat's gen_judgment reads it."""
    match = DOUBLE_BRACKETS.search(text) or SINGLE_BRACKETS.search(text)
    if not match:
        return None
    value = float(match.group(1))
    return value if 1 <= value <= 10 else None


def correct_or_incorrect(text: str) -> float | None:
    """The dataset judge's one-word verdict: CORRECT is 1, INCORRECT 0, anything else no verdict."""
    word = text.strip().split(maxsplit=1)[0].strip(".,:;!*\"'").upper() if text.strip() else ""
    return {"CORRECT": 1.0, "INCORRECT": 0.0}.get(word)
