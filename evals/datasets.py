"""Dataset evals: a dataset version's rows (uploaded, or made from traces) scored by one or more scorers."""

from .benchmarks.base import Benchmark, Row, Score
from .dataset_rows import parse_upload
from .dataset_versions import add_rows, new_dataset, replace_rows, rows_at
from .judges import Judge, Rubric, correct_or_incorrect
from .models import Dataset, DatasetVersion, Deployment
from .scoring import DATASET_SCORERS, LLM_JUDGE, Usage, last_number

JUDGE_PROMPT = (
    "You grade answers. Question:\n{input}\n\nReference answer:\n{expected}\n\nCandidate answer:\n{output}\n\n"
    "Reply with exactly one word: CORRECT if the candidate answer matches the reference, INCORRECT otherwise."
)
# The prompt above, as a judge's identity: a new wording is a new version, whose labels start again.
DATASET_RUBRIC = Rubric(name="dataset-correct", version="1", scale=(0.0, 1.0))


def create_dataset(project, user, name: str, data, filename: str = "") -> Dataset:
    """A new dataset, version 1, of an uploaded file's rows (JSONL, or CSV when `filename` ends in .csv)."""
    return new_dataset(project, user, name, parse_upload(data, filename), note=f"Uploaded {filename}".strip())


def upload_into(dataset: Dataset, user, data, filename: str = "", *, replace: bool = False) -> DatasetVersion:
    """A file's rows as the dataset's next version: added after its rows, or in their place (replace_rows matches them by place)."""
    rows = parse_upload(data, filename)
    how = "replacing its rows" if replace else "appended"
    note = f"Uploaded {filename or 'a file'}, {how}"
    return replace_rows(dataset, user, rows, note) if replace else add_rows(dataset, user, rows, note)


class DatasetBenchmark(Benchmark):
    """A dataset eval's rows and scorers, under the benchmark protocol."""

    description = "A dataset of the project's, at one of its versions."
    licence = "the uploader's"
    prompt_format = "Zero-shot chat: user: the row's input; a conversation input's messages as they are."

    def __init__(self, dataset: Dataset, scorers: list, judge: Deployment | None = None, version: int | None = None):
        self.name = dataset.name
        self.source = f"dataset #{dataset.pk}"
        self.dataset = dataset
        # The eval's pinned version: the dataset may have moved on since.
        self.number = dataset.version if version is None else version
        self.count = dataset.row_count if version is None else DatasetVersion.objects.get(dataset=dataset, number=version).row_count
        self.scorers = scorers
        # The llm_judge scorer's judge is the eval's (Eval.judge), so its tokens are priced like a judged benchmark's.
        self.judge = Judge(judge, DATASET_RUBRIC) if judge is not None else None

    def load(self):
        return [Row(id=str(r.position), input=r.input, reference=r.expected, extra={"messages": r.messages}) for r in rows_at(self.dataset, self.number)]

    def version(self):
        return f"dataset #{self.dataset.pk} version {self.number}, {self.count} rows"

    def row_count(self):
        return self.count

    def prompt(self, row):
        return row["messages"] or [{"role": "user", "content": row.input}]

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
