"""Run scores per model label: mean ± 95% CI, and Welch's t-test between two labels.

Harness scores are real-valued and few (a handful of repeats), so the
interval is Student's t, not Wilson, and two labels are compared unpaired:
repeats of a harness share no rows to pair.
"""

from django.db.models import Exists, OuterRef

from evals import statistics
from traces.models import TraceSession

from .models import Run

NO_LABEL = "(no model)"


def _scored(harness):
    return Run.objects.filter(harness=harness, status=Run.Status.SUCCEEDED, score__isnull=False)


def scores_by_label(harness) -> dict[str, list[float]]:
    scored = _scored(harness).order_by("created_at")
    groups: dict[str, list[float]] = {}
    for label, score in scored.values_list("model_label", "score"):
        groups.setdefault(label or NO_LABEL, []).append(score)
    return groups


def summary(groups: dict[str, list[float]]) -> list[dict]:
    rows = []
    for label, scores in sorted(groups.items()):
        interval = statistics.mean_interval(scores)
        rows.append({"label": label, "n": len(scores), "mean": statistics.mean(scores), "ci": interval.as_list() if interval else None})
    return rows


def compare_labels(groups: dict[str, list[float]], a: str, b: str) -> dict:
    """Label b against label a: Welch's t-test on the run scores, with the verdict at α = 0.05."""
    result = {"a": a, "b": b, "n_a": len(groups.get(a, [])), "n_b": len(groups.get(b, []))}
    test = statistics.welch(groups.get(a, []), groups.get(b, []))
    if test is None:
        return {
            **result,
            "verdict": statistics.NOT_DECISIVE,
            "delta": None,
            "t": None,
            "df": None,
            "p_value": None,
            "note": "Welch's test needs at least two scored runs of each label: start more repeats.",
        }
    decisive = test.p_value < statistics.ALPHA
    return {**result, "delta": test.delta, "t": test.t, "df": test.df, "p_value": test.p_value, "verdict": statistics.verdict(decisive, test.delta), "note": ""}


def compared_runs(harness, a: str, b: str) -> list[Run]:
    """The runs behind a comparison of label b against a, a's first, best score first.

    Each has `side` ("A" or "B"), `traced` (whether it has a trajectory to
    open) and, on B's traced runs, `against`: A's best traced run, to set
    beside it step by step (one query, the EXISTS inside it).
    """
    labels = {"" if label == NO_LABEL else label: side for side, label in (("B", b), ("A", a))}
    traced = TraceSession.objects.filter(run=OuterRef("pk"))
    runs = list(_scored(harness).filter(model_label__in=labels).annotate(traced=Exists(traced)).order_by("-score", "created_at", "pk"))
    for run in runs:
        run.side = labels[run.model_label]
    best_a = next((run for run in runs if run.side == "A" and run.traced), None)
    for run in runs:
        run.against = best_a if run.side == "B" and run.traced else None
    return sorted(runs, key=lambda run: run.side)
