"""The dataset eval: a dataset version's rows (uploaded, or made from traces) scored by one or more scorers."""

from ..benchmarks.base import Benchmark, Row
from ..models import Dataset, DatasetVersion, Deployment
from ..scoring.base import Context, Item, Score, Usage
from ..scoring.judge import Judge, dataset_rubric
from ..scoring.scorers import named, read_config
from .versions import rows_at


class DatasetBenchmark(Benchmark):
    """A dataset eval's rows and scorers ({"name", "options"} each, as actions._check_scorers stored them), under the benchmark protocol."""

    description = "A dataset of the project's, at one of its versions."
    licence = "the uploader's"
    prompt_format = "Zero-shot chat: user: the row's input; a conversation input's messages as they are."

    def __init__(self, dataset: Dataset, scorers: list[dict], judge: Deployment | None = None, version: int | None = None):
        self.name = dataset.name
        self.source = f"dataset #{dataset.pk}"
        self.dataset = dataset
        # The eval's pinned version: the dataset may have moved on since.
        self.number = dataset.version if version is None else version
        self.count = dataset.row_count if version is None else DatasetVersion.objects.get(dataset=dataset, number=version).row_count
        self.scorers = []
        for entry in scorers:
            name, options, _ = read_config(entry)
            self.scorers.append((name, named(name), named(name).check(options)))
        # The judging scorer's judge is the eval's (Eval.judge), so its tokens are priced like a judged benchmark's.
        judged = next((options for _, scorer, options in self.scorers if scorer.needs_judge), None)
        self.judge = Judge(judge, dataset_rubric(judged)) if judge is not None and judged is not None else None

    def load(self):
        return [Row(id=str(r.position), input=r.input, reference=r.expected, extra={"messages": r.messages}) for r in rows_at(self.dataset, self.number)]

    def version(self):
        return f"dataset #{self.dataset.pk} version {self.number}, {self.count} rows"

    def row_count(self):
        return self.count

    def prompt(self, row):
        return row["messages"] or [{"role": "user", "content": row.input}]

    async def score(self, row, output, sandbox=None):
        item, context = Item(row.input, output, row.reference), Context(judge=self.judge, sandbox=sandbox)
        scores, detail, usage, extracted = {}, {}, Usage(), ""
        for name, scorer, options in self.scorers:
            score = await scorer.score(item, options, context)
            scores[name], usage, extracted = score.value, usage + score.usage, extracted or score.extracted
            if "judge" in score.detail:
                detail = {"judge": score.detail["judge"], "judge_reasoning": score.detail["reasoning"][:2000]}
        # A row is right only when every scorer says so.
        return Score(min(scores.values()), extracted, detail={**scores, **detail}, usage=usage)

    async def aclose(self):
        if self.judge is not None:
            await self.judge.aclose()
