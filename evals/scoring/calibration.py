"""A judge's calibration card: how often people agree with its verdicts, and with itself.

People label judged samples on the eval page (their own grade, or agree /
disagree). For each judge (deployment, rubric and rubric version:
`judges.Judge.key`) the card shows the labels' count, Cohen's κ between
judge and people (quadratic-weighted on a 1-10 scale, where 7 against 8 is a
near miss; plain on correct/incorrect) with a bootstrap interval, the base
rates behind it (κ reads differently when nearly every verdict is
"correct"), and the judge's agreement with itself when it was asked twice
(MT-Bench asks about one row in ten twice). Fewer than CALIBRATED_AT labels:
"judge not calibrated", wherever a score it produced is shown.
tests/test_calibration.py checks κ against scikit-learn's cohen_kappa_score.
"""

from collections import Counter

import numpy as np
from django.utils import timezone

from belvedir.core.ids import parse_id

from .. import benchmarks, statistics
from ..models import Deployment, Eval, JudgeLabel, Sample
from .judge import dataset_rubric, judge_key

CALIBRATED_AT = 30
NOT_CALIBRATED = f"judge not calibrated: fewer than {CALIBRATED_AT} human labels agree or disagree with it"
RESAMPLES = 2000


def cohen_kappa(a, b, weights: str | None = None, sample_weight=None) -> float | None:
    """Cohen's κ of two raters' grades (None when it is undefined: no pairs, or chance agreement is total).

    weights: None (plain), "linear" or "quadratic", as scikit-learn's cohen_kappa_score; the categories are
    the grades either rater gave, in order. sample_weight: each pair's weight (scikit-learn's too): a label drawn
    from a stratum sampled more densely than others counts for less (review/active.py).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0:
        return None
    labels = np.unique(np.concatenate([a, b]))
    return _kappa(np.searchsorted(labels, a), np.searchsorted(labels, b), len(labels), weights, sample_weight)


def _kappa(ia, ib, k: int, weights: str | None, sample_weight=None) -> float | None:
    """κ of pairs given as category indices 0..k-1: one bincount, so a bootstrap of thousands stays milliseconds."""
    observed = np.bincount(ia * k + ib, weights=sample_weight, minlength=k * k).reshape(k, k)
    total = observed.sum()
    if total <= 0:
        return None
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / total
    if weights is None:
        disagreement = 1 - np.eye(k)
    else:
        distance = np.abs(np.subtract.outer(np.arange(k), np.arange(k)))
        disagreement = distance if weights == "linear" else distance**2
    chance = float((disagreement * expected).sum())
    if chance <= 1e-12 * total:
        return None
    return 1 - float((disagreement * observed).sum()) / chance


def kappa_interval(a, b, weights: str | None = None, sample_weight=None, strata=None, resamples: int = RESAMPLES) -> statistics.Interval | None:
    """95 % bootstrap interval of κ, resampling the labelled verdicts (fixed seed: the same labels print the same interval).

    strata: each pair's stratum; the bootstrap then resamples within each one, keeping its size, as the labels were
    drawn (a stratified design's interval, review/active.py)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = a.size
    if n < 2:
        return None
    labels = np.unique(np.concatenate([a, b]))
    ia, ib, k = np.searchsorted(labels, a), np.searchsorted(labels, b), len(labels)
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    rng = np.random.default_rng(statistics.BOOTSTRAP_SEED)
    groups = [np.arange(n)] if strata is None else [np.flatnonzero(np.asarray(strata) == s) for s in dict.fromkeys(strata)]
    drawn = np.concatenate([group[rng.integers(0, group.size, size=(resamples, group.size))] for group in groups], axis=1)
    values = sorted(v for rows in drawn if (v := _kappa(ia[rows], ib[rows], k, weights, w[rows])) is not None)
    if not values:
        return None
    return statistics.Interval(float(np.quantile(values, 0.025)), float(np.quantile(values, 0.975)))


def weights_for(scale) -> str | None:
    """Quadratic weights on a graded scale (1-10): a near miss counts less than a far one; none on right/wrong."""
    return "quadratic" if scale[1] - scale[0] > 1 else None


def evidence(project, judge_key: str) -> list[tuple]:
    """Every label of the judge in the project: (judge's grade, person's grade, weight, stratum).

    Labels made on an eval's or an evaluator's page weigh 1 each (stratum "page"); a review queue's are weighted by
    how densely its strata were drawn (review/judged.py), so a queue that asks mostly about close calls does not
    make the judge look worse than it is."""
    labels = [(j, h, 1.0, "page") for j, h in JudgeLabel.objects.filter(judge_key=judge_key, sample__eval__project=project).values_list("judge_value", "value")]
    for source in LABEL_SOURCES:
        labels += [(*row, 1.0, "page") if len(row) == 2 else tuple(row) for row in source(project, judge_key)]
    return labels


def card(project, judge_key: str) -> dict:
    """Everything the card shows for one judge of the project. κ, its interval and the exact agreement weigh each
    label as evidence() does; n, the confusion matrix and the base rates count labels as they are."""
    labels = evidence(project, judge_key)
    scale = scale_of(judge_key)
    weights = weights_for(scale)
    judge_values, human_values = [row[0] for row in labels], [row[1] for row in labels]
    sample_weight, strata = [row[2] for row in labels], [row[3] for row in labels]
    kappa = cohen_kappa(judge_values, human_values, weights, sample_weight)
    interval = kappa_interval(judge_values, human_values, weights, sample_weight, strata)
    repeats = repeat_pairs(project, judge_key)
    repeat_kappa = cohen_kappa([x for x, _ in repeats], [y for _, y in repeats], weights)
    deployment_id = judge_key.split(":", 1)[0]
    total_weight = sum(sample_weight)
    return {
        "key": judge_key,
        "deployment": Deployment.objects.filter(project=project, pk=pk).values_list("name", flat=True).first() if (pk := parse_id(deployment_id)) else None,
        "rubric": judge_key.split(":", 1)[1] if ":" in judge_key else judge_key,
        "scale": list(scale),
        "weights": weights or "none",
        "n": len(labels),
        "kappa": kappa,
        "kappa_ci": interval.as_list() if interval else None,
        "exact_agreement": sum(w for j, h, w, _ in labels if j == h) / total_weight if labels else None,
        "confusion": confusion(labels),
        "base_rate": base_rates(judge_values, human_values, scale),
        "self_consistency": {
            "n": len(repeats),
            "kappa": repeat_kappa,
            "exact_agreement": statistics.mean([float(x == y) for x, y in repeats]) if repeats else None,
        },
        "calibrated": len(labels) >= CALIBRATED_AT,
        "needed": max(0, CALIBRATED_AT - len(labels)),
    }


def confusion(labels) -> dict:
    """{"grades": [...], "counts": [[judge grade row × person grade column]]}: how many labels fell in each cell."""
    grades = sorted({row[0] for row in labels} | {row[1] for row in labels})
    index = {grade: i for i, grade in enumerate(grades)}
    counts = [[0] * len(grades) for _ in grades]
    for row in labels:
        counts[index[row[0]]][index[row[1]]] += 1
    return {"grades": grades, "counts": counts}


def base_rates(judge_values, human_values, scale) -> dict:
    """What κ is read against: how often each side says "correct", or each side's mean grade and the commonest human grade."""
    if not human_values:
        return {}
    if weights_for(scale) is None:
        return {"judge_positive": statistics.mean(judge_values), "human_positive": statistics.mean(human_values)}
    commonest, count = Counter(human_values).most_common(1)[0]
    return {
        "judge_mean": statistics.mean(judge_values),
        "human_mean": statistics.mean(human_values),
        "human_mode": commonest,
        "human_mode_share": count / len(human_values),
    }


def scale_of(judge_key: str) -> tuple[float, float]:
    """The rubric's scale, from the name in the key ("12:mt_bench-single@3f2a…", "12:evaluator-4-1-10@2")."""
    rubric = judge_key.split(":", 1)[-1].split("@", 1)[0]
    return (1.0, 10.0) if rubric.startswith("mt_bench") or rubric.endswith("-1-10") else (0.0, 1.0)


# Judges that grade outside evals (traces' evaluators on live traffic) add their labels and keys to the
# cards here, from their app's ready(): this module imports no app above it.
LABEL_SOURCES = []  # fn(project, judge_key) -> [(judge_value, human_value), or (judge_value, human_value, weight, stratum), ...]
KEY_SOURCES = []  # fn(project) -> [judge_key, ...]
COUNT_SOURCES = []  # fn(project_id, judge_key) -> how many labels the LABEL_SOURCES entry beside it gives


def repeat_pairs(project, judge_key: str) -> list[tuple[float, float]]:
    """(first verdict, second verdict) for every verdict the judge was asked twice."""
    pairs = []
    details = Sample.objects.filter(eval__project=project, error="", scores__judge=judge_key, scores__has_key="repeat").values_list("scores", flat=True)
    for detail in details.iterator():
        pairs += [(turn["rating"], again) for turn, again in zip(detail.get("turns", []), detail["repeat"], strict=False)]
    return pairs


def judge_key_of(ev: Eval) -> str | None:
    """The key of the eval's judge (deployment, rubric, version), known before any verdict is in."""
    if not ev.judge_id:
        return None
    if ev.dataset_id:
        judged = next((entry["options"] for entry in ev.scorers if entry["name"] == "llm_judge"), {})
        return judge_key(ev.judge_id, dataset_rubric(judged))
    benchmark = benchmarks.get(ev.benchmark)
    rubric = benchmark.rubric(ev.benchmark_version) if benchmark is not None else None
    return judge_key(ev.judge_id, rubric) if rubric is not None else None


def calibration_status(ev: Eval) -> dict:
    """Is the eval's judge calibrated? {"key", "labels", "calibrated"}, counted over the project's labels."""
    key = judge_key_of(ev)
    labels = label_count(ev.project_id, key) if key else 0
    return {"key": key, "labels": labels, "calibrated": labels >= CALIBRATED_AT}


def label_count(project_id: int, judge_key: str) -> int:
    """How many labels the judge's card counts (what evidence() reads), counted in the database, not read."""
    return JudgeLabel.objects.filter(judge_key=judge_key, sample__eval__project_id=project_id).count() + sum(
        count(project_id, judge_key) for count in COUNT_SOURCES
    )


class LabelRefused(ValueError):
    """A label that cannot be taken: the sample has no verdict there, or the grade is off the judge's scale."""

    status_code = 400


def verdicts_of(sample: Sample) -> list[float]:
    """The judge's grades on a sample, one per turn (of its first epoch when it has several)."""
    detail = sample.completions[0].get("scores", {}) if sample.completions else sample.scores
    if "turns" in detail:
        return [float(turn["rating"]) for turn in detail["turns"]]
    if "llm_judge" in detail:
        return [float(detail["llm_judge"])]
    return []


def person_grade(scale: tuple[float, float], judged: float, *, value: float | None, agree: bool | None) -> float:
    """A person's grade of a verdict `judged` on `scale`: their own `value`, or the judge's (agree) or its opposite (a
    pass/fail disagreement); LabelRefused when it is off the scale or both or neither are given. Evals' labels and
    evaluators' (traces) are read by this one rule."""
    low, high = scale
    if (value is None) == (agree is None):
        raise LabelRefused("Give either your own grade (value) or whether you agree with the judge (agree).")
    if agree is not None:
        if not agree and weights_for((low, high)) is not None:
            raise LabelRefused(f"To disagree with a {low:g}-{high:g} grade, give your own (value).")
        value = judged if agree else high + low - judged
    if not (low <= value <= high) or (weights_for((low, high)) is None and value not in (low, high)):
        raise LabelRefused(
            f"A grade on this judge's scale is {'a number from' if high - low > 1 else 'either'} {low:g} {'to' if high - low > 1 else 'or'} {high:g}."
        )
    return float(value)


def posted_grade(data) -> dict:
    """A label form's answer (the eval's page and an evaluator's): {"value": the person's grade} when label=grade, else
    {"agree": whether they agree}; ValueError or KeyError when the grade is not a number."""
    answer = data.get("label", "")
    if answer == "grade":
        return {"value": float(data["value"]), "agree": None}
    return {"value": None, "agree": {"agree": True, "disagree": False}.get(answer)}


def label_verdict(sample: Sample, user, *, turn: int = 1, value: float | None = None, agree: bool | None = None) -> JudgeLabel:
    """Record a person's grade of one verdict (their own, or agree / disagree); a second label by the same person replaces the first."""
    key = judge_key_of(sample.eval)
    grades = verdicts_of(sample) if not sample.error else []
    if key is None or not grades:
        raise LabelRefused(f"Row {sample.row_index} holds no verdict of a judge to label.")
    if not 1 <= turn <= len(grades):
        raise LabelRefused(f"Row {sample.row_index}'s verdicts are turns 1 to {len(grades)}.")
    judged = grades[turn - 1]
    value = person_grade(scale_of(key), judged, value=value, agree=agree)
    label, _ = JudgeLabel.objects.update_or_create(
        sample=sample, turn=turn, user=user, defaults={"judge_key": key, "judge_value": judged, "value": float(value), "created_at": timezone.now()}
    )
    return label


def judge_keys_of(project) -> list[str]:
    """Every judge that graded an eval of the project, newest first."""
    keys = []
    for ev in Eval.objects.filter(project=project, judge__isnull=False).select_related("judge").order_by("-pk")[:500]:
        if (key := judge_key_of(ev)) and key not in keys:
            keys.append(key)
    for source in KEY_SOURCES:
        keys += [key for key in source(project) if key not in keys]
    return keys


def labels_by_row(ev: Eval, samples, user) -> dict[int, dict[int, float]]:
    """{row index: {turn: the person's grade}} for the page's rows: what they already labelled."""
    found = {}
    rows = [s.row_index for s in samples]
    for row, turn, value in JudgeLabel.objects.filter(sample__eval=ev, sample__row_index__in=rows, user=user).values_list("sample__row_index", "turn", "value"):
        found.setdefault(row, {})[turn] = value
    return found
