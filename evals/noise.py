"""The noise floor of a score: how far two runs of the same deployment on the same rows land apart.

An eval with `epochs` k asks every row k times (the deployment's own
sampling). Per row, the pass rate over its epochs and whether it flipped
(right in one epoch, wrong in another); for the eval, the flip rate and the
score of each epoch. The spread of the score between runs is estimated from
the rows' own variance across epochs: with s_i² the sample variance of row
i's k scores, one run's score varies by SD = sqrt(Σ s_i²) / n around its
mean (the rows are fixed, only sampling moves), which is steadier than the
spread of k epoch scores when k is 3. Two runs then differ by SD·√2, and
the noise floor is the 95 % half-width of that: a paired delta inside
±floor is what rerunning the same deployment produces 95 % of the time.
Its interval resamples rows.
"""

import math

import numpy as np

from . import statistics
from .models import Eval

Z95 = statistics.z(0.975)
RESAMPLES = 2000


def epoch_scores_of(ev: Eval) -> list[list[float]]:
    """Each scored row's scores, one per epoch ([] for an eval without epochs)."""
    if ev.epochs <= 1:
        return []
    rows = ev.samples.filter(error="", score__isnull=False).values_list("completions", flat=True)
    return [[float(c["score"]) for c in completions] for completions in rows.iterator() if len(completions) == ev.epochs]


def noise(ev: Eval) -> dict | None:
    """{"epochs", "n", "epoch_scores", "flipped", "flip_rate", "spread_sd", "noise_floor", "noise_floor_ci"}; None without epochs."""
    rows = epoch_scores_of(ev)
    if not rows:
        return None
    return summary(rows)


def summary(rows: list[list[float]]) -> dict:
    scores = np.array(rows, dtype=float)
    n, k = scores.shape
    flipped = int(np.sum(scores.min(axis=1) != scores.max(axis=1)))
    floor = _floor(scores)
    drawn = np.random.default_rng(statistics.BOOTSTRAP_SEED).integers(0, n, size=(RESAMPLES, n))
    floors = np.sort([_floor(scores[rows_drawn]) for rows_drawn in drawn])
    return {
        "epochs": k,
        "n": n,
        "epoch_scores": [round(float(v), 6) for v in scores.mean(axis=0)],
        "flipped": flipped,
        "flip_rate": flipped / n,
        "spread_sd": floor / (Z95 * math.sqrt(2)),
        "noise_floor": floor,
        "noise_floor_ci": [round(float(np.quantile(floors, 0.025)), 6), round(float(np.quantile(floors, 0.975)), 6)],
    }


def _floor(scores: np.ndarray) -> float:
    n = scores.shape[0]
    sd = math.sqrt(float(scores.var(axis=1, ddof=1).sum())) / n
    return Z95 * math.sqrt(2) * sd
