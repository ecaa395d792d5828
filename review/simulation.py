"""Synthetic judges and people with a known κ, labelled at random or by active calibration until κ's interval is as
narrow as asked: how many labels each took, and whether the interval held the true κ. bench/review.py prints it;
tests/test_review.py runs a few seeds of it."""

from dataclasses import dataclass

import numpy as np

from evals.scoring.calibration import cohen_kappa

from . import active

SCALE = (0.0, 1.0)


@dataclass
class Population:
    judge: np.ndarray
    human: np.ndarray
    strata: np.ndarray

    @property
    def kappa(self) -> float:
        return cohen_kappa(self.judge, self.human)


def population(rng, size: int = 5000, close_share: float = 0.2, close_error: float = 0.35, sure_error: float = 0.04, positive: float = 0.6) -> Population:
    """A pass/fail judge whose verdicts people overturn at `close_error` on its close calls (a share of the items it
    was unsure of, say by disagreeing with itself) and at `sure_error` elsewhere."""
    strata = (rng.random(size) < close_share).astype(int)
    judge = (rng.random(size) < positive).astype(float)
    flips = rng.random(size) < np.where(strata == active.CLOSE, close_error, sure_error)
    return Population(judge, np.where(flips, 1 - judge, judge), strata)


def label_until(pop: Population, target_width: float, rng, *, actively: bool, check_every: int = 5, cap: int = 4000) -> dict:
    """Label items one at a time until the interval is narrower than `target_width`: {"labels", "kappa", "low", "high", "covered"}."""
    size = len(pop.judge)
    strata = pop.strata if actively else np.zeros(size, dtype=int)
    sizes = {int(h): int((strata == h).sum()) for h in np.unique(strata)}
    order = {h: list(rng.permutation(np.flatnonzero(strata == h))) for h in sizes}
    taken, labelled = [], {h: (0, 0) for h in sizes}
    found = {"width": None}
    while len(taken) < min(cap, size):
        h = active.next_stratum(sizes, labelled, [h for h in sizes if order[h]])
        i = order[h].pop()
        taken.append(i)
        n, d = labelled[h]
        labelled[h] = (n + 1, d + int(active.disagrees(pop.judge[i], pop.human[i], SCALE)))
        if len(taken) % check_every == 0:
            found = active.estimate(pop.judge[taken], pop.human[taken], strata[taken], sizes, SCALE)
            if active.enough(found, target_width, strata[taken].tolist(), sizes):
                break
    truth = pop.kappa
    covered = found.get("low") is not None and found["low"] <= truth <= found["high"]
    return {"labels": len(taken), "kappa": found.get("kappa"), "low": found.get("low"), "high": found.get("high"), "covered": covered, "truth": truth}


def compare(seeds: int, target_width: float = 0.2, **shape) -> dict:
    """Active against random over `seeds` populations: labels needed (median, each run) and how often the interval held the truth."""
    runs = {"active": [], "random": []}
    for seed in range(seeds):
        pop = population(np.random.default_rng(seed), **shape)
        for name in runs:
            runs[name].append(label_until(pop, target_width, np.random.default_rng(10_000 + seed), actively=name == "active"))
    return {
        name: {
            "median_labels": float(np.median([r["labels"] for r in found])),
            "labels": [r["labels"] for r in found],
            "coverage": float(np.mean([r["covered"] for r in found])),
        }
        for name, found in runs.items()
    }
