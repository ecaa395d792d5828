"""An eval's figures besides its score, headline first: lm-eval's metrics for a log-likelihood eval
(acc, acc_norm), or the benchmark's own (IFBench's four accuracies); empty for most.

The eval's score is the headline metric (the first); the others are
computed from the stored samples when asked for, as per-category scores are,
reading only their metric keys out of each sample's scores.
"""

from django.db.models.fields.json import KT

from . import benchmarks, statistics
from .categories import scored_details
from .models import Eval


def metrics(ev: Eval) -> list[dict]:
    """[{"name", "headline", "n", "unit", "score", "score_ci"}, ...], the headline first."""
    if metric_names(ev):
        return metric_scores(ev)
    benchmark = benchmarks.get(ev.benchmark) if ev.benchmark else None
    # The details are read only if the benchmark reads them: a lazy iterator, no query otherwise.
    return benchmark.metrics(scored_details(ev)) if benchmark is not None else []


def metric_names(ev: Eval) -> tuple[str, ...]:
    benchmark = benchmarks.get(ev.benchmark) if ev.benchmark else None
    described = benchmark.loglikelihood() if benchmark is not None and ev.mode == Eval.Mode.LOGLIKELIHOOD else None
    return tuple(described["metrics"]) if described else ()


def metric_scores(ev: Eval) -> list[dict]:
    """Log-likelihood mode's metrics; empty for a generative eval."""
    names = metric_names(ev)
    if not names:
        return []
    stored = ev.samples.filter(error="", score__isnull=False).values_list(*(KT(f"scores__{name}") for name in names))
    columns = list(zip(*stored.iterator(), strict=True)) or [() for _ in names]
    return [_entry(name, i == 0, [float(v) for v in values if v is not None]) for i, (name, values) in enumerate(zip(names, columns, strict=True))]


def _entry(name: str, headline: bool, values: list[float]) -> dict:
    interval = statistics.score_interval(values)
    return {
        "name": name,
        "headline": headline,
        "n": len(values),
        "unit": "rows",
        "score": statistics.mean(values) if values else None,
        "score_ci": interval.as_list() if interval else None,
    }
