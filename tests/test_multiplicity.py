"""Holm and Benjamini–Hochberg, as the suite comparison adjusts its benchmarks' p-values, against statsmodels."""

import random

import pytest
from statsmodels.stats.multitest import multipletests

from evals.multiplicity import benjamini_hochberg, holm

CASES = [
    [0.01],
    [0.04, 0.01, 0.03],
    [0.001, 0.001, 0.5, 1.0],
    [0.2, 0.2, 0.2, 0.2],
    [0.00001, 0.049, 0.051, 0.3, 0.7, 0.012],
    *([random.Random(seed).random() ** 4 for _ in range(random.Random(seed).randint(2, 14))] for seed in range(12)),
]


@pytest.mark.parametrize("p_values", CASES)
def test_holm_and_bh_adjust_as_statsmodels_does(p_values):
    assert holm(p_values) == pytest.approx(list(multipletests(p_values, method="holm")[1]), abs=1e-12)
    assert benjamini_hochberg(p_values) == pytest.approx(list(multipletests(p_values, method="fdr_bh")[1]), abs=1e-12)


def test_holm_keeps_a_finding_that_survives_ten_tests_and_drops_one_that_does_not():
    alone = [0.004] + [0.5] * 9
    assert holm(alone)[0] == pytest.approx(0.04) and holm([0.02] + [0.5] * 9)[0] == pytest.approx(0.2)
