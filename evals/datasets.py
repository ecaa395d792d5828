"""Dataset evals: uploaded JSONL rows scored by one or more scorers."""

import json

from .benchmarks.base import Benchmark, Row, Score
from .engine import RequestFailed, complete, http_session
from .models import Dataset, DatasetRow, Deployment
from .scoring import DATASET_SCORERS, LLM_JUDGE, last_number

MAX_ROWS = 100_000
JUDGE_PROMPT = (
    "You grade answers. Question:\n{input}\n\nReference answer:\n{expected}\n\nCandidate answer:\n{output}\n\n"
    "Reply with exactly one word: CORRECT if the candidate answer matches the reference, INCORRECT otherwise."
)


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

    def __init__(self, dataset: Dataset, scorers: list):
        self.name = dataset.name
        self.source = f"dataset #{dataset.pk}"
        self.dataset = dataset
        self.scorers = scorers
        # Loaded now: the judge is called from the engine's event loop, where the ORM is off limits.
        judge_ids = [s["deployment"] for s in scorers if scorer_name(s) == LLM_JUDGE]
        self.judges = {d.pk: d for d in Deployment.objects.filter(pk__in=judge_ids)}
        self._judge_client = None

    def load(self):
        return [Row(id=str(r.index), input=r.input, reference=r.expected) for r in self.dataset.rows.order_by("index")]

    def version(self):
        return f"dataset #{self.dataset.pk}, {self.dataset.row_count} rows"

    def row_count(self):
        return self.dataset.row_count

    def prompt(self, row):
        return [{"role": "user", "content": row.input}]

    async def score(self, row, output, sandbox=None):
        judged = {}
        for scorer in self.scorers:
            if scorer_name(scorer) == LLM_JUDGE:
                judged[LLM_JUDGE] = await self._judge(scorer, row, output)
        return self._combine(row, output, judged)

    async def aclose(self):
        if self._judge_client is not None:
            await self._judge_client.close()

    def _combine(self, row, output, judged):
        scores = {}
        for scorer in self.scorers:
            name = scorer_name(scorer)
            if name == LLM_JUDGE:
                scores[name] = judged[name]
            else:
                scores[name] = DATASET_SCORERS[name](output, row["reference"], **(scorer.get("options", {}) if isinstance(scorer, dict) else {}))
        # A row is right only when every scorer says so.
        extracted = (last_number(output) or "") if "last_number" in scores else ""
        return Score(min(scores.values()), extracted, detail=scores)

    async def _judge(self, scorer, row, output) -> float:
        judge = self.judges[scorer["deployment"]]
        if self._judge_client is None:
            self._judge_client = http_session(judge.max_in_flight)
        messages = [{"role": "user", "content": JUDGE_PROMPT.format(input=row["input"], expected=row["reference"], output=output)}]
        try:
            verdict = await complete(self._judge_client, judge, messages, {"temperature": 0, "max_tokens": 5})
        except RequestFailed:
            return 0.0
        return float(verdict.text.strip().upper().startswith("CORRECT"))


def scorer_name(scorer) -> str:
    return scorer["name"] if isinstance(scorer, dict) else str(scorer)
