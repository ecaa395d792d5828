import json
from functools import cache
from pathlib import Path

from ..scoring import gsm8k_answer, normalize_number

NAME = "gsm8k"
DESCRIPTION = "Grade-school math word problems (test split, 1,319). The answer is the last number, or the one after '####'."
METRIC = "accuracy"
GENERATION = {"temperature": 0, "max_tokens": 512}
SANDBOXED = False
DATA = Path(__file__).resolve().parent.parent / "data" / "gsm8k" / "test.jsonl"
INSTRUCTION = "Solve the problem step by step. End with the final answer on its own line as '#### <number>'."


@cache
def rows() -> tuple[dict, ...]:
    with DATA.open() as lines:
        return tuple(
            {"input": item["question"], "reference": normalize_number(item["answer"].rsplit("####", 1)[1].strip()) or ""} for item in map(json.loads, lines)
        )


def prompt(row) -> list[dict]:
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": row["input"]}]


def score(row, output: str) -> tuple[float, str]:
    answer = gsm8k_answer(output)
    return float(answer is not None and answer == row["reference"]), answer or ""
