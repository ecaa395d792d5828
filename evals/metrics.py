"""A log-likelihood eval's score under each of the metrics lm-eval reports for its benchmark (acc, acc_norm).

The eval's score is the headline metric (the first); the others are
computed from the stored samples when asked for, as per-category scores are,
reading only their metric keys out of each sample's scores.
"""

from django.db.models.fields.json import KT

from . import benchmarks, statistics
from .models import Eval


def metric_names(ev: Eval) -> tuple[str, ...]:
    benchmark = benchmarks.get(ev.benchmark) if ev.benchmark else None
    described = benchmark.loglikelihood() if benchmark is not None and ev.mode == Eval.Mode.LOGLIKELIHOOD else None
    return tuple(described["metrics"]) if described else ()


def metric_scores(ev: Eval) -> list[dict]:
    """[{"name", "headline", "n", "score", "score_ci"}, ...], the headline first; empty for a generative eval."""
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
        "score": statistics.mean(values) if values else None,
        "score_ci": interval.as_list() if interval else None,
    }
