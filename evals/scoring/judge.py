"""LLM judges: a deployment asked to grade an answer with a named, versioned prompt.

One machinery for every judged score: MT-Bench's 1-10 ratings
(benchmarks/mt_bench.py), and the llm_judge scorer (`LlmJudge`) that dataset
evals and live evaluators name. A judge is identified by its deployment, its
prompt and the prompt's version (`Judge.key`), which is what a calibration
card collects labels under (calibration.py): the same model with a reworded
rubric is another judge.

A judge that answers but cannot be parsed, or cannot be reached, makes the
sample an error (ScoringError), never a zero: a zero would be a verdict
nobody gave. Its tokens count all the same (`Usage` on the error).
"""

import hashlib
import re
from dataclasses import dataclass

from ..client import RequestFailed, complete, http_session
from ..models import Deployment
from .base import Context, Item, Option, Score, Scorer, ScorerConfigError, ScoringError, Usage

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


def verdict_word(text: str) -> float | None:
    """A one-word verdict: PASS or CORRECT is 1, FAIL or INCORRECT 0, anything else no verdict."""
    word = text.strip().split(maxsplit=1)[0].strip(".,:;!*\"'").upper() if text.strip() else ""
    return {"PASS": 1.0, "CORRECT": 1.0, "FAIL": 0.0, "INCORRECT": 0.0}.get(word)


# How a verdict is read, by the scale it is given on: the one table every judged score uses.
PARSERS = {"pass_fail": verdict_word, "1-10": rating_1_to_10}
SCALES = {"pass_fail": (0.0, 1.0), "1-10": (1.0, 10.0)}

# The default prompts: against the reference answer where the item has one (a dataset's row), else on the answer alone (live traffic).
WITH_REFERENCE = (
    "You grade answers. Question:\n{input}\n\nReference answer:\n{expected}\n\nCandidate answer:\n{output}\n\n"
    "Reply with exactly one word: CORRECT if the candidate answer matches the reference, INCORRECT otherwise."
)
WITHOUT_REFERENCE = (
    "You review an AI assistant's work. The user asked:\n{input}\n\nThe assistant answered:\n{output}\n\n"
    "Did the assistant answer helpfully and correctly? Reply with exactly one word: PASS or FAIL."
)
# The reference prompt above, as a judge's identity: a new wording is a new version, whose labels start again.
DATASET_RUBRIC = Rubric(name="dataset-correct", version="1", scale=(0.0, 1.0))


def dataset_rubric(options: dict) -> Rubric:
    """A dataset eval's rubric: the default prompt's, or one named for the prompt and scale it was given."""
    if not options.get("prompt", "") and options.get("scale", "pass_fail") == "pass_fail":
        return DATASET_RUBRIC
    # The scale ends the name: calibration.scale_of reads it there.
    digest = hashlib.sha256(f"{options.get('scale', 'pass_fail')}\n{options.get('prompt', '')}".encode()).hexdigest()[:12]
    return Rubric(name=f"dataset-{digest}-{options['scale']}", version="1", scale=SCALES[options["scale"]])


PLACES = re.compile(r"\{(input|expected|output)\}")


class LlmJudge(Scorer):
    name = "llm_judge"
    description = "The owner's judge deployment grades the output with a prompt, on a pass/fail or 1-10 scale."
    needs_judge = True
    options = {
        "prompt": Option("", "The judge's prompt, placing {output} (and {input}, {expected}); a default that compares with the reference when empty."),
        "scale": Option("pass_fail", "pass_fail (PASS/FAIL, CORRECT/INCORRECT) or 1-10 ([[8]], as MT-Bench's judge writes it)."),
        "max_tokens": Option(1024, "The most tokens the judge may write."),
    }

    def check(self, options, *, references=True):
        checked = super().check(options, references=references)
        if checked["scale"] not in PARSERS:
            raise ScorerConfigError(f"The judge's scale is one of {', '.join(PARSERS)}.")
        if checked["prompt"] and "{output}" not in checked["prompt"]:
            raise ScorerConfigError("The judge's prompt must place the answer it judges: {output} (and the question: {input}).")
        if not 1 <= checked["max_tokens"] <= 8192:
            raise ScorerConfigError("The judge's max_tokens is between 1 and 8,192.")
        return checked

    def scale_of(self, options):
        return SCALES[options.get("scale", "pass_fail")]

    async def score(self, item: Item, options, ctx: Context) -> Score:
        if ctx.judge is None:
            raise ScoringError("The llm_judge scorer has no judge deployment to ask.")
        prompt = options.get("prompt") or (WITH_REFERENCE if item.reference else WITHOUT_REFERENCE)
        # One pass over the prompt: an answer that holds "{input}" is judged as written, never expanded.
        fields = {"input": item.input, "expected": item.reference, "output": item.output}
        text = PLACES.sub(lambda m: fields[m.group(1)], prompt)
        generation = {"temperature": 0, "max_tokens": options.get("max_tokens", 1024)}
        verdict = await ctx.judge.grade([{"role": "user", "content": text}], PARSERS[options.get("scale", "pass_fail")], generation)
        return Score(verdict.value, detail={"judge": ctx.judge.key, "reasoning": verdict.reasoning[:4000]}, usage=verdict.usage)
