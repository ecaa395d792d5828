"""Making and changing evaluators, and what their scores add up to: the daily series and a session's scores."""

import secrets
from collections import defaultdict
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, F, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from belvedir.core import jsonvalues
from billing.actions import debt_gate, refuse_if_in_debt
from evals import statistics
from evals.models import Deployment
from evals.scoring.calibration import LabelRefused, person_grade
from evals.scoring.judge import SCALES, judge_key

from .evaluators import EvaluatorError, check_scorer, rubric_of, scorer_of_kind
from .models import JUDGE_SCORER, Evaluator, EvaluatorLabel, EvaluatorScore, TaskGroup
from .scorers import evaluator_scorer

# What changes a verdict: edited, they make a new version (old scores keep theirs).
RULE_FIELDS = ("target", "task_group", "user_id", "metadata", "outcome", "source", "harness", "sample_rate", "seed", "scorer", "judge")
FIELDS = (*RULE_FIELDS, "name", "enabled", "daily_budget")


@debt_gate("a judge evaluator made or left enabled: its judge's tokens on every session")
def save_evaluator(project, user, data: dict, evaluator: Evaluator | None = None) -> Evaluator:
    """Create an evaluator, or change one (a new version when its rule changes); EvaluatorError naming a broken rule.

    A judge evaluator that would be enabled is refused while the project is in debt (InsufficientBalance):
    it would ask its judge about every new session. Code and trajectory checks cost nothing, and turning a
    judge off is always allowed.
    """
    name = (data.get("name") or "").strip()
    if not name or len(name) > 100:
        raise EvaluatorError("An evaluator needs a name of 1 to 100 characters.")
    if Evaluator.objects.filter(project=project, name=name).exclude(pk=evaluator.pk if evaluator else None).exists():
        raise EvaluatorError(f"This project already has an evaluator named {name}.")
    judge, group = data.get("judge"), data.get("task_group")
    if judge is not None and (not isinstance(judge, Deployment) or judge.project_id != project.pk):
        raise EvaluatorError("The judge must be a deployment of this project.")
    if group is not None and (not isinstance(group, TaskGroup) or group.project_id != project.pk):
        raise EvaluatorError("The task group must be one of this project's.")
    rate = data.get("sample_rate", 1.0)
    if rate is None or not 0 <= float(rate) <= 1:
        raise EvaluatorError("The sampling rate is between 0 and 1 (1: every session).")
    if data.get("outcome", "") not in ("", "success", "fail", "none"):
        raise EvaluatorError("The outcome filter is success, fail, none or empty.")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise EvaluatorError("The metadata filter is a mapping of keys to text values.")
    try:
        jsonvalues.check(metadata, "metadata")
    except jsonvalues.JsonValueError as exc:
        raise EvaluatorError(exc.message) from None
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not jsonvalues.INT_MIN <= seed <= jsonvalues.INT_MAX):
        raise EvaluatorError("The seed is a whole number that fits 64 bits (its column's type).")
    budget = data.get("daily_budget")
    if budget is not None and Decimal(budget) < 0:
        raise EvaluatorError("The daily budget must not be negative.")
    scorer = check_scorer(scorer_given(data), judge, budget)
    judged = evaluator_scorer(scorer["name"]).needs_judge
    values = {
        "name": name,
        "enabled": data.get("enabled", True),
        "target": data.get("target") or Evaluator.Target.SESSION,
        "task_group": group,
        "user_id": (data.get("user_id") or "").strip(),
        "metadata": metadata,
        "outcome": data.get("outcome", ""),
        "source": data.get("source") or Evaluator.Source.ANY,
        "harness": data.get("harness"),
        "sample_rate": float(rate),
        "seed": data.get("seed") if data.get("seed") is not None else (evaluator.seed if evaluator else secrets.randbelow(2**31)),
        "scorer": scorer,
        "judge": judge if judged else None,
        "daily_budget": budget,
    }
    if values["target"] not in Evaluator.Target.values or values["source"] not in Evaluator.Source.values:
        raise EvaluatorError("The target is session or task; the source any, production or harness.")
    if judged and values["enabled"]:
        refuse_if_in_debt(project)
    with transaction.atomic():
        if evaluator is None:
            return Evaluator.objects.create(project=project, created_by=user, **values)
        changed = any(getattr(evaluator, field) != values[field] for field in RULE_FIELDS)
        for field, value in values.items():
            setattr(evaluator, field, value)
        if changed:
            evaluator.version += 1
        evaluator.save()
    return evaluator


def scorer_given(data: dict):
    """The scorer `data` names: {"name", "options"} as `scorer`, or the way taken before, `kind` and `config` (one release)."""
    if data.get("scorer") is not None:
        return data["scorer"]
    if data.get("kind") is None:
        raise EvaluatorError('An evaluator needs a scorer: {"name": ..., "options": {...}} (GET /api/v1/scorers lists them, and trajectory).')
    return scorer_of_kind(data["kind"], data.get("config") or {})


def summary(evaluator: Evaluator) -> dict:
    """Counts by status (of its current version's scores), the mean score with its interval, and today's judge spend."""
    return summaries([evaluator])[evaluator.pk]


def summaries(evaluators) -> dict[int, dict]:
    """summary() of each evaluator by id, in three queries however many there are (a list's page)."""
    ids = [evaluator.pk for evaluator in evaluators]
    current = EvaluatorScore.objects.filter(evaluator__in=ids, version=F("evaluator__version")).order_by()
    counts = {
        row.pop("evaluator"): row
        for row in current.values("evaluator").annotate(
            scored=Count("pk", filter=Q(status=EvaluatorScore.Status.SCORED)),
            errors=Count("pk", filter=Q(status=EvaluatorScore.Status.ERROR)),
            skipped=Count("pk", filter=Q(status=EvaluatorScore.Status.SKIPPED)),
            cost=Sum("cost"),
        )
    }
    values = defaultdict(list)
    for pk, value in current.filter(status=EvaluatorScore.Status.SCORED).values_list("evaluator", "value"):
        values[pk].append(value)
    midnight = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    today = dict(
        EvaluatorScore.objects.filter(evaluator__in=ids, scored_at__gte=midnight)
        .order_by()
        .values("evaluator")
        .annotate(s=Sum("cost"))
        .values_list("evaluator", "s")
    )
    found = {}
    for pk in ids:
        interval = statistics.score_interval(values[pk]) if values[pk] else None
        found[pk] = {
            **counts.get(pk, {"scored": 0, "errors": 0, "skipped": 0, "cost": None}),
            "mean": statistics.mean(values[pk]) if values[pk] else None,
            "mean_ci": interval.as_list() if interval else None,
            "spent_today": today.get(pk),
        }
    return found


def daily(evaluator: Evaluator, days: int = 30) -> dict[str, list[dict]]:
    """{task group name: [{"day", "n", "mean", "ci"}]}: each day's mean score (by when the traffic happened), with its 95% interval."""
    since = timezone.now() - timezone.timedelta(days=days)
    rows = (
        EvaluatorScore.objects.filter(evaluator=evaluator, version=evaluator.version, status=EvaluatorScore.Status.SCORED, session_at__gte=since)
        .annotate(day=TruncDate("session_at"))
        .values_list("task_group__name", "day", "value")
    )
    grouped: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    for group, day, value in rows.iterator():
        grouped[group or "(no task group)"][day].append(value)
    series = {}
    for group, by_day in sorted(grouped.items()):
        points = []
        for day, values in sorted(by_day.items()):
            interval = statistics.score_interval(values)
            points.append({"day": day.isoformat(), "n": len(values), "mean": statistics.mean(values), "ci": interval.as_list() if interval else None})
        series[group] = points
    return series


def session_scores(session) -> list[EvaluatorScore]:
    """A session's scores (its own and its tasks'), each evaluator's newest version first."""
    return list(EvaluatorScore.objects.filter(session=session).select_related("evaluator", "task").order_by("evaluator__name", "-version", "task_id"))


def label_score(score: EvaluatorScore, user, *, value: float | None = None, agree: bool | None = None) -> EvaluatorLabel:
    """A person's grade of a judge evaluator's verdict (their own, or agree / disagree); the same person again replaces it."""
    evaluator = score.evaluator
    if not evaluator.needs_judge or score.status != EvaluatorScore.Status.SCORED:
        raise EvaluatorError("Only a judge's verdict can be labelled.")
    try:
        value = person_grade(SCALES[evaluator.scale], score.value, value=value, agree=agree)
    except LabelRefused as exc:
        raise EvaluatorError(str(exc)) from None
    label, _ = EvaluatorLabel.objects.update_or_create(
        score=score, user=user, defaults={"judge_key": score.detail.get("judge", ""), "judge_value": score.value, "value": float(value)}
    )
    return label


def label_pairs(project, judge_key: str) -> list[tuple[float, float]]:
    """A calibration card's evidence from evaluators: (judge's grade, person's grade) per labelled verdict."""
    return list(EvaluatorLabel.objects.filter(judge_key=judge_key, score__project=project).values_list("judge_value", "value"))


def label_count(project_id: int, judge_key: str) -> int:
    return EvaluatorLabel.objects.filter(judge_key=judge_key, score__project_id=project_id).count()


def judge_keys(project) -> list[str]:
    keys = []
    for evaluator in Evaluator.objects.filter(project=project, scorer__name=JUDGE_SCORER, judge__isnull=False):
        keys.append(judge_key(evaluator.judge_id, rubric_of(evaluator)))
    return keys
