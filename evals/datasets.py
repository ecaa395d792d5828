"""Dataset evals: uploaded JSONL rows scored by one or more scorers."""

import json

from .benchmarks.base import Benchmark, Row, Score
from .judges import Judge, Rubric, correct_or_incorrect
from .models import Dataset, DatasetRow, Deployment
from .scoring import DATASET_SCORERS, LLM_JUDGE, Usage, last_number

MAX_ROWS = 100_000
JUDGE_PROMPT = (
    "You grade answers. Question:\n{input}\n\nReference answer:\n{expected}\n\nCandidate answer:\n{output}\n\n"
    "Reply with exactly one word: CORRECT if the candidate answer matches the reference, INCORRECT otherwise."
)
# The prompt above, as a judge's identity: a new wording is a new version, whose labels start again.
DATASET_RUBRIC = Rubric(name="dataset-correct", version="1", scale=(0.0, 1.0))


class DatasetError(ValueError):
    pass


def parse_jsonl(data) -> list[dict]:
    """Rows with `input` and `expected`; an error names the first bad line.

    `data` is bytes or a file, read line by line (an uploaded file is never
    read whole into memory).
    """
    lines = data.splitlines() if isinstance(data, bytes) else data
    rows = []
    for number, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise DatasetError("The file is not UTF-8 text." if number == 1 else f"Line {number} is not UTF-8 text.") from None
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"Line {number} is not valid JSON ({exc.msg}).") from None
        except (ValueError, RecursionError):
            # A number too long to convert, or nesting deeper than Python recurses.
            raise DatasetError(f"Line {number} is not valid JSON here (a number too long or nesting too deep).") from None
        if not isinstance(item, dict) or "input" not in item or "expected" not in item:
            raise DatasetError(f'Line {number} needs an object with "input" and "expected".')
        rows.append({"input": _text(item["input"]), "expected": _text(item["expected"])})
        if len(rows) > MAX_ROWS:
            raise DatasetError(f"A dataset holds at most {MAX_ROWS:,} rows.")
    if not rows:
        raise DatasetError("The file has no rows.")
    return rows


def _text(value) -> str:
    # Stored as text: no NUL, and lone surrogates (valid as JSON escapes) replaced.
    return str(value).replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def create_dataset(project, user, name: str, data) -> Dataset:
    rows = parse_jsonl(data)
    dataset = Dataset.objects.create(project=project, name=name, created_by=user, row_count=len(rows))
    DatasetRow.objects.bulk_create(
        [DatasetRow(dataset=dataset, index=i, input=r["input"], expected=r["expected"]) for i, r in enumerate(rows)], batch_size=2000
    )
    return dataset


class DatasetBenchmark(Benchmark):
    """A dataset eval's rows and scorers, under the benchmark protocol."""

    description = "An uploaded JSONL dataset."
    licence = "the uploader's"
    prompt_format = "Zero-shot chat: user: the row's input."

    def __init__(self, dataset: Dataset, scorers: list, judge: Deployment | None = None):
        self.name = dataset.name
        self.source = f"dataset #{dataset.pk}"
        self.dataset = dataset
        self.scorers = scorers
        # The llm_judge scorer's judge is the eval's (Eval.judge), so its tokens are priced like a judged benchmark's.
        self.judge = Judge(judge, DATASET_RUBRIC) if judge is not None else None

    def load(self):
        return [Row(id=str(r.index), input=r.input, reference=r.expected) for r in self.dataset.rows.order_by("index")]

    def version(self):
        return f"dataset #{self.dataset.pk}, {self.dataset.row_count} rows"

    def row_count(self):
        return self.dataset.row_count

    def prompt(self, row):
        return [{"role": "user", "content": row.input}]

    async def score(self, row, output, sandbox=None):
        scores, detail, usage = {}, {}, Usage()
        for scorer in self.scorers:
            name = scorer_name(scorer)
            if name == LLM_JUDGE:
                verdict = await self._judge(row, output)
                scores[name], usage = verdict.value, usage + verdict.usage
                detail = {"judge": self.judge.key, "judge_reasoning": verdict.reasoning[:2000]}
            else:
                scores[name] = DATASET_SCORERS[name](output, row["reference"], **(scorer.get("options", {}) if isinstance(scorer, dict) else {}))
        # A row is right only when every scorer says so.
        extracted = (last_number(output) or "") if "last_number" in scores else ""
        return Score(min(scores.values()), extracted, detail={**scores, **detail}, usage=usage)

    async def aclose(self):
        if self.judge is not None:
            await self.judge.aclose()

    async def _judge(self, row, output):
        messages = [{"role": "user", "content": JUDGE_PROMPT.format(input=row["input"], expected=row["reference"], output=output)}]
        return await self.judge.grade(messages, correct_or_incorrect, {"temperature": 0, "max_tokens": 5})


def scorer_name(scorer) -> str:
    return scorer["name"] if isinstance(scorer, dict) else str(scorer)
