"""A judge's calibration card: Cohen's kappa (plain and weighted) against scikit-learn, labels from the API and the page,
self-consistency, and "judge not calibrated" wherever a judged score shows until 30 labels are in."""

import random

import pytest
from sklearn.metrics import cohen_kappa_score

from evals.scoring.calibration import CALIBRATED_AT, cohen_kappa, kappa_interval


def noisy_grades(seed: int, n: int, spread: int) -> tuple[list[int], list[int]]:
    """A judge's 1-10 grades and a person's, who differ from it by up to `spread` points."""
    rng = random.Random(seed)
    judge = [rng.randint(1, 10) for _ in range(n)]
    return judge, [min(10, max(1, grade + rng.randint(-spread, spread))) for grade in judge]


PAIRS = [
    ([1, 0, 1, 1, 0, 1, 0, 0], [1, 0, 0, 1, 0, 1, 1, 0]),
    ([3, 5, 7, 9, 9, 2, 6, 8, 8, 10], [4, 5, 6, 9, 10, 1, 7, 8, 6, 10]),
    ([1, 1, 1, 0], [1, 1, 0, 0]),
    *(noisy_grades(seed, 60, spread) for seed in range(6) for spread in (0, 1, 3, 9)),
]


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("pair", PAIRS)
def test_kappa_matches_scikit_learn(pair, weights):
    a, b = pair
    assert cohen_kappa(a, b, weights) == pytest.approx(cohen_kappa_score(a, b, weights=weights), abs=1e-12)


def test_kappa_is_undefined_without_disagreement_to_chance_and_its_interval_covers_it():
    assert cohen_kappa([], []) is None and cohen_kappa([1, 1, 1], [1, 1, 1]) is None
    a, b = noisy_grades(1, 200, 2)
    interval = kappa_interval(a, b, "quadratic")
    assert interval.low < cohen_kappa(a, b, "quadratic") < interval.high and interval.high - interval.low < 0.2
    assert CALIBRATED_AT == 30
