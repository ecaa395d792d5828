"""Scores by category (MMLU's subjects and groups, MATH's levels, IFBench's instruction groups), each with its 95% interval.

Computed from the stored samples when asked for (one query of two columns),
so they are never stale while an eval runs. An errored row counts in no
category, as it counts in no score.
"""

from collections import defaultdict

from . import benchmarks, statistics
from .models import Eval


def axes_of(ev: Eval) -> tuple[str, ...]:
    benchmark = benchmarks.get(ev.benchmark) if ev.benchmark else None
    return benchmark.categories if benchmark is not None else ()


def group_by_category(items, axes) -> dict[str, dict[str, list]]:
    """{axis: {value: [item, ...]}} from (category, item) pairs, axes in the benchmark's order, values sorted."""
    grouped = {axis: defaultdict(list) for axis in axes}
    for category, item in items:
        for axis in axes:
            if (value := category.get(axis)) is not None:
                grouped[axis][value].append(item)
    return {axis: dict(sorted(values.items())) for axis, values in grouped.items()}


def category_scores(ev: Eval) -> dict[str, list[dict]]:
    """{axis: [{"name", "n", "score", "score_ci"}, ...]}; empty for a benchmark without categories.

    The rows' axes first, then those the benchmark scores from each sample's
    detail (IFBench's instruction groups, counted in instructions).
    """
    axes = axes_of(ev)
    scores = {}
    if axes:
        stored = _scored(ev).values_list("category", "score")
        scores = {axis: [_entry(name, values) for name, values in by_value.items()] for axis, by_value in group_by_category(stored.iterator(), axes).items()}
    benchmark = benchmarks.get(ev.benchmark) if ev.benchmark else None
    if benchmark is not None and benchmark.detail_categories:
        scores.update(benchmark.detail_category_scores(scored_details(ev)))
    return scores


def scored_details(ev: Eval):
    return _scored(ev).values_list("scores", flat=True).iterator()


def _scored(ev: Eval):
    return ev.samples.filter(error="", score__isnull=False)


def _entry(name: str, values: list[float]) -> dict:
    interval = statistics.score_interval(values)
    return {"name": name, "n": len(values), "score": statistics.mean(values), "score_ci": interval.as_list() if interval else None}
