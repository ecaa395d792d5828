"""A sampled deployment as a monitor sees it, run after run: the simulation behind bench/monitors.py and the tests
that hold the monitor to its stated false-alarm rate.

Each row has its own chance of being answered right (a U-shaped Beta(0.5, 0.5):
most rows nearly always right or wrong, the rest coin flips, about a quarter of
rows flipping between two runs, as sampled answers do). A drop of d points
scales every chance by (1 - d / mean), so the expected score falls by exactly d.
"""

import random
from dataclasses import dataclass

from evals.comparison import paired_statistics
from evals.multiplicity import HOLM, adjust

from . import verdicts


def abilities(rows: int, rng: random.Random) -> list[float]:
    return [rng.betavariate(0.5, 0.5) for _ in range(rows)]


def answers(chances: list[float], drop: float, rng: random.Random) -> list[float]:
    scale = 1 - drop / (sum(chances) / len(chances)) if drop else 1.0
    return [1.0 if rng.random() < p * scale else 0.0 for p in chances]


def compared(baseline: list[float], run: list[float]) -> dict:
    """One benchmark's comparison row as evals/suites/comparison.py makes it (Holm over one benchmark is the p itself)."""
    row = {"benchmark": "simulated", "n": len(run), **paired_statistics(baseline, run)}
    row["p_adjusted"] = adjust([row["p_value"]], HOLM)[0]
    return row


@dataclass
class Outcome:
    verdicts: list[str]
    scores: list[float]

    def first(self, verdict: str, since: int = 0) -> int | None:
        """Runs after `since` until the first of this verdict (1: the next run), None if never."""
        for i, found in enumerate(self.verdicts[since:], start=1):
            if found == verdict:
                return i
        return None


def monitor(
    runs: int,
    rows: int,
    at_alpha: float,
    min_drop: float,
    *,
    drop: float = 0.0,
    drop_from: int | None = None,
    drift: float | None = None,
    seed: int = 0,
    rolling: bool = False,
) -> Outcome:
    """`runs` scheduled runs after a baseline run, each judged against it (as monitors/runs.py does), or with
    `rolling`, against the last run that passed (the baseline monitors/runs.py does not use, for the bench).
    From run `drop_from` on the deployment is `drop` worse; with `drift`, it gets worse by that much a run
    until it is `drop` worse."""
    rng = random.Random(seed)
    chances = abilities(rows, rng)
    baseline = answers(chances, 0.0, rng)
    found, scores = [], []
    for i in range(runs):
        fallen = 0.0
        if drop_from is not None and i >= drop_from:
            fallen = drop if drift is None else min(drop, drift * (i - drop_from + 1))
        run = answers(chances, fallen, rng)
        verdict = verdicts.decide([compared(baseline, run)], at_alpha, min_drop).verdict
        if rolling and verdict in (verdicts.PASSED, verdicts.IMPROVED):
            baseline = run
        found.append(verdict)
        scores.append(sum(run) / rows)
    return Outcome(found, scores)


def fixed_threshold(scores: list[float], baseline_score: float, threshold: float) -> list[bool]:
    """The anchors' monitor: an alert whenever a run scores `threshold` below the baseline's score."""
    return [score < baseline_score - threshold for score in scores]
