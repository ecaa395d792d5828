"""Correcting verdicts for testing many benchmarks at once.

A suite comparison asks "is B worse anywhere?" of ten or more benchmarks. At
α = 0.05 each, ten independent tests on two identical models flag at least
one 40 % of the time; a CI gate on it would fail a good build two times in
five. Holm's step-down keeps the chance of any false verdict (the
family-wise error rate) at α, whatever the dependence between benchmarks,
and rejects everything Bonferroni does and often more. Benjamini–Hochberg
controls the false discovery rate instead (the expected share of false ones
among the verdicts given), which suits screening many categories, not a
gate that fails on a single finding: Holm is the suites' correction, BH is
here for the category breakdowns that want it. tests/test_multiplicity.py
checks both against statsmodels' `multipletests`.
"""

HOLM, BENJAMINI_HOCHBERG = "holm", "fdr_bh"


def holm(p_values: list[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: reject where adjusted < α."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (q-values), in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i], reverse=True)
    adjusted, running = [0.0] * m, 1.0
    for position, i in enumerate(order):
        rank = m - position
        running = min(running, p_values[i] * m / rank)
        adjusted[i] = min(1.0, running)
    return adjusted


def adjust(p_values: list[float], method: str = HOLM) -> list[float]:
    return {HOLM: holm, BENJAMINI_HOCHBERG: benjamini_hochberg}[method](p_values)
