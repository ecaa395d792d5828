"""Active calibration: ask people about the items whose labels tell most about a judge, and stop when κ is known.

Items are split into two strata when queued: close calls (a graded verdict within a point of the scale's middle,
a judge that disagreed with itself when asked twice, or two judges that disagree) and the rest. A judge errs most
on close calls, so a label there carries more information about its agreement with people. Labels are drawn
between the strata by Neyman allocation (each stratum's share ∝ its size × the spread of disagreement in it,
learned as labels arrive), at random within a stratum; κ is estimated with each label weighted by its stratum's
size over its labels (so over-asking about close calls does not bias it), and its interval by a bootstrap within
strata. The queue stops asking once the interval is narrower than the width the user set.

bench/review.py measures the labels this takes against labelling a random sample to the same width, on synthetic
judges and people with a known κ.
"""

import math

import numpy as np

from evals.scoring.calibration import cohen_kappa, kappa_interval, weights_for

CLOSE = 1
SURE = 0
# No stop before this many labels, and ten in each stratum that has items: a bootstrap of a stratum with a handful of
# labels and no disagreement among them says its spread is nil, and would stop the queue on luck.
MIN_LABELS = 30
MIN_PER_STRATUM = 10


def stratum(judge_value: float, scale, *, disagreement: bool = False) -> int:
    """CLOSE for a close call (see above), SURE otherwise."""
    low, high = scale
    if disagreement:
        return CLOSE
    if weights_for(scale) is not None and abs(judge_value - (low + high) / 2) <= 1:
        return CLOSE
    return SURE


def disagrees(judge_value: float, human_value: float, scale) -> bool:
    """Does the person disagree with the judge: a different verdict, or two points or more apart on a graded scale."""
    return abs(judge_value - human_value) >= (2 if weights_for(scale) is not None else 0.5)


def spread(labelled: int, disagreed: int) -> float:
    """The standard deviation of 'the person disagrees' in a stratum, with one pseudo-label of each kind (never 0)."""
    p = (disagreed + 1) / (labelled + 2)
    return math.sqrt(p * (1 - p))


def next_stratum(population: dict[int, int], labelled: dict[int, tuple[int, int]], open_strata) -> int | None:
    """The stratum the next label should come from: the one furthest below its Neyman share of the labels so far."""
    open_strata = [h for h in open_strata if population.get(h)]
    if not open_strata:
        return None
    shares = {h: population[h] * spread(*labelled.get(h, (0, 0))) for h in population if population[h]}
    total_share = sum(shares.values())
    done = sum(n for n, _ in labelled.values()) + 1
    return max(open_strata, key=lambda h: (shares[h] / total_share * done - labelled.get(h, (0, 0))[0], -h))


def label_weights(strata, population: dict[int, int]) -> np.ndarray:
    """Each label's weight: its stratum's items over its stratum's labels, scaled so that the weights average 1."""
    strata = np.asarray(strata)
    counts = {h: int((strata == h).sum()) for h in set(strata.tolist())}
    weights = np.array([population.get(h, 0) / counts[h] for h in strata.tolist()], dtype=float)
    return weights * (len(weights) / weights.sum()) if weights.sum() else weights


def estimate(judge_values, human_values, strata, population: dict[int, int], scale) -> dict:
    """κ of the judge against people with its 95 % interval, from labels drawn by stratum: {"kappa", "low", "high", "width", "n"}.

    The interval is a bootstrap within strata over the labels plus, in each stratum, one pseudo-label where the person
    agrees and one where they disagree (on the stratum's commonest verdict): a stratum whose few labels hold no
    disagreement would otherwise bootstrap to no spread at all, and stop the queue on luck (bench/review.py measured
    the interval holding the true κ in 70 % of runs without them)."""
    n = len(judge_values)
    if n < 2:
        return {"kappa": None, "low": None, "high": None, "width": None, "n": n}
    judge_values, human_values, strata = list(judge_values), list(human_values), list(strata)
    weights = label_weights(strata, population)
    kind = weights_for(scale)
    kappa = cohen_kappa(judge_values, human_values, kind, weights)
    low, high = scale
    step = 2 if kind is not None else high - low
    padded_j, padded_h, padded_s = list(judge_values), list(human_values), list(strata)
    for h in dict.fromkeys(strata):
        given = [j for j, s in zip(judge_values, strata, strict=True) if s == h]
        commonest = max(set(given), key=given.count)
        other = commonest + step if commonest + step <= high else commonest - step
        padded_j += [commonest, commonest]
        padded_h += [commonest, other]
        padded_s += [h, h]
    interval = kappa_interval(padded_j, padded_h, kind, label_weights(padded_s, population), padded_s, resamples=400)
    if interval is None:
        return {"kappa": kappa, "low": None, "high": None, "width": None, "n": n}
    return {"kappa": kappa, "low": interval.low, "high": interval.high, "width": interval.high - interval.low, "n": n}


def enough(found: dict, target_width: float, strata, population: dict[int, int]) -> bool:
    """Stop asking: the interval is narrower than the target, from enough labels in every stratum with items."""
    if found["width"] is None or found["n"] < MIN_LABELS or found["width"] > target_width:
        return False
    strata = list(strata)
    return all(strata.count(h) >= min(MIN_PER_STRATUM, size) for h, size in population.items() if size)
