import json
from pathlib import Path

from ..scoring import gsm8k_answer, normalize_number
from .base import Benchmark, Row, Score, chat
from .data import sha256_of

DATA = Path(__file__).resolve().parent.parent / "data" / "gsm8k" / "test.jsonl"
INSTRUCTION = "Solve the problem step by step. End with the final answer on its own line as '#### <number>'."


class GSM8K(Benchmark):
    name = "gsm8k"
    description = "Grade-school math word problems (test split, 1,319). The answer is the last number, or the one after '####'."
    metric = "accuracy"
    licence = "MIT"
    source = "openai/grade-school-math (test.jsonl, shipped in evals/data/gsm8k)"
    prompt_format = f"Zero-shot chat: system {INSTRUCTION!r}; user: the question."
    generation = {"temperature": 0, "max_tokens": 512}

    def load(self):
        with DATA.open() as lines:
            return [
                Row(id=str(i), input=item["question"], reference=normalize_number(item["answer"].rsplit("####", 1)[1].strip()) or "")
                for i, item in enumerate(map(json.loads, lines))
            ]

    def version(self):
        return f"sha256:{sha256_of(DATA)}"

    def prompt(self, row):
        return chat(INSTRUCTION, row.input)

    async def score(self, row, output, sandbox=None):
        answer = gsm8k_answer(output)
        return Score(float(answer is not None and answer == row.reference), answer or "")


BENCHMARK = GSM8K()
rows = BENCHMARK.rows
