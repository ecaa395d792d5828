"""A queue that calibrates a judge: the verdicts it is filled with, and its labels as evidence on the judge's card."""

from collections import Counter

from django.db.models import Count

from evals.models import Eval, Sample
from evals.scoring.calibration import judge_key_of, scale_of, verdicts_of
from traces.models import EvaluatorScore

from . import active
from .models import Item, Label, Queue

# A calibration queue is filled with at most this many of the judge's verdicts (the newest).
MAX_VERDICTS = 100_000


def verdicts(project, judge_key: str) -> list[dict]:
    """The judge's verdicts in the project, each {kind, object_id, judge_value, stratum}: eval samples it graded (turn 1)
    and the sessions its evaluators scored."""
    scale = scale_of(judge_key)
    found = []
    evals = [ev for ev in Eval.objects.filter(project=project, judge__isnull=False).order_by("-pk")[:500] if judge_key_of(ev) == judge_key]
    samples = Sample.objects.filter(eval__in=evals, error="").order_by("-pk").values_list("pk", "scores", "completions")
    for pk, scores, completions in samples[:MAX_VERDICTS].iterator():
        grades = verdicts_of(Sample(scores=scores, completions=completions))
        if not grades:
            continue
        repeat = scores.get("repeat") or []
        self_disagrees = bool(repeat) and repeat[0] != grades[0]
        found.append(
            {"kind": Item.Kind.SAMPLE, "object_id": pk, "judge_value": grades[0], "stratum": active.stratum(grades[0], scale, disagreement=self_disagrees)}
        )
    scores = EvaluatorScore.objects.filter(project=project, status=EvaluatorScore.Status.SCORED, detail__judge=judge_key, value__isnull=False)
    scored = list(scores.order_by("-pk").values_list("session_id", "value")[: MAX_VERDICTS - len(found)])
    others = _other_judges(project, judge_key, [session for session, _ in scored])
    low, high = scale
    newest = {}
    for session, value in scored:  # newest first: a session scored again keeps its latest verdict
        newest.setdefault(session, value)
    for session, value in newest.items():
        passed = value > (low + high) / 2
        disagreement = any((other > (o_low + o_high) / 2) != passed for other, (o_low, o_high) in others.get(session, []))
        found.append(
            {"kind": Item.Kind.SESSION, "object_id": session, "judge_value": value, "stratum": active.stratum(value, scale, disagreement=disagreement)}
        )
    return found


def _other_judges(project, judge_key: str, sessions: list[int]) -> dict[int, list[tuple[float, tuple]]]:
    """{session: [(another judge's grade, its scale), ...]}: where two judges graded the same session."""
    found = {}
    rows = EvaluatorScore.objects.filter(project=project, session_id__in=sessions, status=EvaluatorScore.Status.SCORED, value__isnull=False)
    rows = rows.filter(detail__judge__isnull=False).exclude(detail__judge=judge_key)
    for session, value, detail in rows.values_list("session_id", "value", "detail").iterator():
        found.setdefault(session, []).append((value, scale_of(detail.get("judge", ""))))
    return found


def human_value(queue: Queue, values: dict) -> float | None:
    """A label's grade on the judge's scale: its `judge_score`, a boolean read as 1/0."""
    value = values.get(queue.judge_score)
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return float(value) if isinstance(value, int | float) else None


def population(queue: Queue) -> dict[int, int]:
    return dict(Item.objects.filter(queue=queue).values_list("stratum").annotate(n=Count("pk")).values_list("stratum", "n"))


def queue_evidence(queue: Queue) -> tuple[list[float], list[float], list[int]]:
    """The queue's labels of its judge's verdicts: judge's grades, people's grades, strata."""
    judged, people, strata = [], [], []
    rows = Label.objects.filter(item__queue=queue, skipped=False, item__judge_value__isnull=False).values_list("item__judge_value", "values", "item__stratum")
    for judge_value, values, stratum in rows.iterator():
        if (value := human_value(queue, values)) is not None:
            judged.append(judge_value)
            people.append(value)
            strata.append(stratum)
    return judged, people, strata


def estimate(queue: Queue) -> dict:
    """The queue's own estimate of the judge's κ (weighted by stratum) and where it stands against the target width."""
    judged, people, strata = queue_evidence(queue)
    sizes = population(queue)
    found = active.estimate(judged, people, strata, sizes, scale_of(queue.judge_key))
    found["strata"] = {h: {"items": sizes.get(h, 0), "labels": count} for h, count in sorted(Counter(strata).items())} | {
        h: {"items": size, "labels": 0} for h, size in sizes.items() if h not in strata
    }
    found["enough"] = bool(queue.target_width) and active.enough(found, queue.target_width, strata, sizes)
    return found


def queue_labels(project, judge_key: str) -> list[tuple]:
    """Evidence for the judge's calibration card (evals.scoring.calibration.LABEL_SOURCES): every queue's labels of it,
    (judge's grade, person's grade, weight, stratum), weighted within each queue by how its strata were drawn."""
    rows = []
    for queue in Queue.objects.filter(project=project, judge_key=judge_key).exclude(judge_score=""):
        judged, people, strata = queue_evidence(queue)
        if not judged:
            continue
        weights = active.label_weights(strata, population(queue))
        rows += [(j, h, float(w), f"queue {queue.pk}/{s}") for j, h, w, s in zip(judged, people, weights, strata, strict=True)]
    return rows


def queue_label_count(project_id: int, judge_key: str) -> int:
    """How many labels queue_labels gives the judge's card: answered labels of its queues' judged items (one query)."""
    return (
        Label.objects.filter(item__queue__project_id=project_id, item__queue__judge_key=judge_key, item__judge_value__isnull=False, skipped=False)
        .exclude(item__queue__judge_score="")
        .count()
    )
