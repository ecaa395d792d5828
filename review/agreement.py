"""How far people agree: per score, Krippendorff's α over every reviewer (any number, labels missing where someone did
not label) and Cohen's κ for each pair of reviewers, each with a 95 % bootstrap interval over items; and the items
where people disagree, listed for adjudication.

α comes from the `krippendorff` package (tests/test_review.py checks it on Krippendorff's own published example);
κ is the calibration card's (checked against scikit-learn). Numbers are interval-level (and κ quadratic-weighted),
booleans and categories nominal. Labels made under every rubric version count, on the scores each version shares.
"""

from itertools import combinations

import krippendorff
import numpy as np

from evals import statistics
from evals.scoring.calibration import cohen_kappa, kappa_interval

from .models import Label, Queue
from .rubric import as_number, level

RESAMPLES = 500
# A pair of reviewers needs this many items in common before its κ is shown.
MIN_PAIR = 5
DISAGREEMENTS_SHOWN = 100


def _labels(queue: Queue) -> tuple[dict[int, dict[int, dict]], dict[int, str]]:
    """{item id: {reviewer id: values}} of the answered items, and {reviewer id: username}."""
    by_item, names = {}, {}
    for item_id, reviewer, name, values in (
        Label.objects.filter(item__queue=queue, skipped=False).values_list("item_id", "reviewer_id", "reviewer__username", "values").iterator()
    ):
        by_item.setdefault(item_id, {})[reviewer] = values
        names[reviewer] = name
    return by_item, names


def alpha(matrix: np.ndarray, measure: str) -> float | None:
    """Krippendorff's α of a reviewers × items matrix (NaN where not labelled); None when it is undefined."""
    pairable = (np.sum(~np.isnan(matrix), axis=0) >= 2).sum()
    if pairable < 1 or len(np.unique(matrix[~np.isnan(matrix)])) < 2:
        return None
    value = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=measure))
    return value if np.isfinite(value) else None


def alpha_interval(matrix: np.ndarray, measure: str) -> statistics.Interval | None:
    """95 % bootstrap interval of α, resampling items (columns); fixed seed."""
    items = matrix.shape[1]
    if items < 2:
        return None
    rng = np.random.default_rng(statistics.BOOTSTRAP_SEED)
    values = sorted(v for columns in rng.integers(0, items, size=(RESAMPLES, items)) if (v := alpha(matrix[:, columns], measure)) is not None)
    if len(values) < RESAMPLES // 2:
        return None
    return statistics.Interval(float(np.quantile(values, 0.025)), float(np.quantile(values, 0.975)))


def report(queue: Queue) -> dict:
    """Per score: α over all reviewers with its interval, κ per reviewer pair, and the items people disagree on."""
    by_item, names = _labels(queue)
    reviewers = sorted(names)
    multiply = {item: labels for item, labels in by_item.items() if len(labels) >= 2}
    scores = [score for score in queue.rubric.scores if score["kind"] != "text"]
    out = {"items_labelled": len(by_item), "items_with_two_or_more": len(multiply), "reviewers": [names[r] for r in reviewers], "scores": []}
    disagreements = {}
    for score in scores:
        name, measure = score["name"], level(score)
        columns = sorted(multiply)
        matrix = np.full((len(reviewers), len(columns)), np.nan)
        row = {reviewer: i for i, reviewer in enumerate(reviewers)}
        for j, item in enumerate(columns):
            for reviewer, values in multiply[item].items():
                number = as_number(score, values.get(name))
                if number is not None:
                    matrix[row[reviewer], j] = number
        found = {"name": name, "level": measure, "alpha": None, "alpha_ci": None, "pairs": []}
        if columns:
            found["alpha"] = alpha(matrix, measure)
            interval = alpha_interval(matrix, measure) if found["alpha"] is not None else None
            found["alpha_ci"] = interval.as_list() if interval else None
        weights = "quadratic" if measure == "interval" else None
        for a, b in combinations(range(len(reviewers)), 2):
            both = ~np.isnan(matrix[a]) & ~np.isnan(matrix[b])
            if both.sum() < MIN_PAIR:
                continue
            kappa = cohen_kappa(matrix[a][both], matrix[b][both], weights)
            interval = kappa_interval(matrix[a][both], matrix[b][both], weights, resamples=RESAMPLES)
            found["pairs"].append(
                {"a": names[reviewers[a]], "b": names[reviewers[b]], "n": int(both.sum()), "kappa": kappa, "kappa_ci": interval.as_list() if interval else None}
            )
        for j, item in enumerate(columns):
            given = matrix[:, j][~np.isnan(matrix[:, j])]
            spread = (score["max"] - score["min"]) / 4 if measure == "interval" else 0
            if given.size >= 2 and given.max() - given.min() > spread:
                disagreements.setdefault(item, []).append(name)
        out["scores"].append(found)
    out["disagreements"] = [{"item": item, "scores": names_} for item, names_ in sorted(disagreements.items())[:DISAGREEMENTS_SHOWN]]
    out["disagreement_count"] = len(disagreements)
    return out
