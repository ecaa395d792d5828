"""A Bernoulli CUSUM for live pass rates, its threshold set from the false alarms a month the team accepts.

Each scored session adds its log-likelihood ratio of "the pass rate fell to
p1 = p0 - min_drop" against "it is p0" to a sum that never goes below zero;
the detector fires when the sum passes h. Its false-alarm rate is its average
run length under p0 (ARL0, in scores): h is the smallest threshold whose ARL0
reaches the scores a month over the false alarms a month.

ARL0 is Brook and Evans' Markov chain on the sum counted in steps of a
twentieth of the smaller increment, so that one increment is exact and the
other off by at most 2.5 % of itself (a grid of a fixed number of states
rounded these small steps badly enough to be off threefold; Siegmund's
approximation ran up to 2.2 times long at a 98 % pass rate). One dense solve
of at most MAX_STATES states; tests/test_monitors.py checks the stated rate
against plain simulation.
"""

import math
from functools import lru_cache

import numpy as np

SUBSTEPS = 20
MAX_STATES = 2500
MAX_H = 40.0


def increments(p0: float, p1: float) -> tuple[float, float]:
    """What a pass and a fail add to the sum."""
    return math.log(p1 / p0), math.log((1 - p1) / (1 - p0))


def average_run_length(h: float, p0: float, p1: float, p: float | None = None) -> float:
    """Scores until the sum first passes h, starting at 0, each passing with probability p (default p0)."""
    p = p0 if p is None else p
    up_pass, up_fail = increments(p0, p1)
    smaller = min(abs(up_pass), up_fail)
    # Coarser when the grid would pass MAX_STATES (a solve of minutes), but still a whole number of steps per
    # smaller increment, so it stays exact; only the larger one is rounded, by at most half a step.
    parts = min(SUBSTEPS, int((MAX_STATES - 1) * smaller / h))
    unit = smaller / parts if parts >= 1 else h / (MAX_STATES - 1)
    states = min(int(h / unit) + 1, MAX_STATES)
    down, up = round(abs(up_pass) / unit), round(up_fail / unit)
    index = np.arange(states)
    transitions = np.zeros((states, states))
    transitions[index, np.maximum(index - down, 0)] += p
    rising = index + up < states  # past h: the detector fired and the chain is left
    transitions[index[rising], index[rising] + up] += 1 - p
    lengths = np.linalg.solve(np.eye(states) - transitions, np.ones(states))
    return float(lengths[0])


@lru_cache(maxsize=256)
def threshold(p0: float, p1: float, arl0: float) -> float:
    """The smallest h (to 2 %) whose ARL0 reaches `arl0` scores."""
    low, high = 0.0, 0.5
    while average_run_length(high, p0, p1) < arl0:
        low, high = high, high * 2
        if high > MAX_H:
            return MAX_H
    while high - low > 0.02 * high:
        middle = (low + high) / 2
        low, high = (middle, high) if average_run_length(middle, p0, p1) < arl0 else (low, middle)
    return high


def step(total: float, passed: bool, p0: float, p1: float) -> float:
    up_pass, up_fail = increments(p0, p1)
    return max(0.0, total + (up_pass if passed else up_fail))


def simulate_run_length(h: float, p0: float, p1: float, p: float, rng: np.random.Generator, chains: int = 2000, limit: int = 10**6) -> np.ndarray:
    """Run lengths of `chains` detectors fed scores passing with probability p (vectorised; `limit` caps each)."""
    up_pass, up_fail = increments(p0, p1)
    totals = np.zeros(chains)
    lengths = np.full(chains, limit)
    alive = np.ones(chains, dtype=bool)
    for t in range(1, limit + 1):
        if not alive.any():
            break
        passed = rng.random(alive.sum()) < p
        totals[alive] = np.maximum(0.0, totals[alive] + np.where(passed, up_pass, up_fail))
        fired = alive.copy()
        fired[alive] = totals[alive] > h
        lengths[fired] = t
        alive &= ~fired
    return lengths
