"""Queues made and changed, every field checked first (ReviewError naming it); a changed rubric is a new version."""

from django.db import IntegrityError, transaction
from django.db.models import Max

from evals.scoring.calibration import judge_keys_of, scale_of, weights_for

from . import active, fill, judged
from .errors import ReviewError
from .models import Item, Queue, RubricVersion
from .rubric import clean_instructions, clean_scores

# A calibrating queue stops at a κ interval this wide unless told otherwise: κ known to about ±0.15.
DEFAULT_WIDTH = 0.3
FIELDS = {"name", "description", "overlap", "blind", "scores", "instructions", "judge", "target_width"}


def _checked(data: dict, *, creating: bool) -> dict:
    unknown = set(data) - FIELDS
    if unknown:
        raise ReviewError(sorted(unknown)[0], f"Unknown fields: {', '.join(sorted(unknown))}. A queue takes {', '.join(sorted(FIELDS))}.")
    clean = {}
    if "name" in data or creating:
        name = str(data.get("name") or "").strip()
        if not 0 < len(name) <= 100:
            raise ReviewError("name", "A queue needs a name of 1 to 100 characters.")
        clean["name"] = name
    if "description" in data:
        if not isinstance(data["description"], str) or len(data["description"]) > 1000:
            raise ReviewError("description", "A description is text of at most 1,000 characters.")
        clean["description"] = data["description"]
    if "overlap" in data:
        overlap = data["overlap"]
        if isinstance(overlap, bool) or not isinstance(overlap, int) or not 1 <= overlap <= 10:
            raise ReviewError("overlap", "overlap is how many people label each item: 1 to 10.")
        clean["overlap"] = overlap
    if "blind" in data:
        if not isinstance(data["blind"], bool):
            raise ReviewError("blind", "blind is true or false.")
        clean["blind"] = data["blind"]
    if "target_width" in data and data["target_width"] is not None:
        width = data["target_width"]
        if isinstance(width, bool) or not isinstance(width, int | float) or not 0.02 <= width <= 2:
            raise ReviewError("target_width", "target_width is the width of κ's 95 % interval to stop at: 0.02 to 2 (0.2: ±0.1).")
        clean["target_width"] = float(width)
    if "scores" in data:
        clean["scores"] = clean_scores(data["scores"])
    if "instructions" in data:
        clean["instructions"] = clean_instructions(data["instructions"])
    return clean


def create_queue(project, user, data: dict) -> Queue:
    """A queue with its rubric's version 1; with `judge` (a judge's key), a queue that calibrates that judge."""
    clean = _checked(data, creating=True)
    judge = data.get("judge") or ""
    if judge:
        return calibrate(project, user, judge, name=clean["name"], target_width=clean.get("target_width", DEFAULT_WIDTH), overlap=clean.get("overlap", 1))
    if "scores" not in clean:
        raise ReviewError("scores", "A queue needs a rubric: a list of scores, each {name, kind, ...}.")
    if "target_width" in clean:
        raise ReviewError("target_width", "target_width belongs to a queue that calibrates a judge (give `judge`).")
    with transaction.atomic():
        queue = Queue.objects.create(
            project=project,
            created_by=user,
            **{key: value for key, value in clean.items() if key not in ("scores", "instructions")},
        )
        RubricVersion.objects.create(queue=queue, number=1, scores=clean["scores"], instructions=clean.get("instructions", ""), created_by=user)
    return queue


def update_queue(queue: Queue, user, data: dict) -> Queue:
    """Change a queue; new scores or instructions make the rubric's next version (labels keep the one they were made under)."""
    clean = _checked(data, creating=False)
    if "judge" in data:
        raise ReviewError("judge", "A queue's judge cannot change: make a new queue.")
    if "target_width" in clean and not queue.judge_key:
        raise ReviewError("target_width", "target_width belongs to a queue that calibrates a judge.")
    if "target_width" in clean:
        found = judged.estimate(queue)
        if found["width"] is not None and found["n"] >= active.MIN_LABELS and found["width"] <= clean["target_width"]:
            raise ReviewError("target_width", f"κ is already known to an interval {found['width']:.2f} wide: ask for a narrower one to label more.")
    with transaction.atomic():
        queue = Queue.objects.select_for_update().get(pk=queue.pk)
        if "scores" in clean or "instructions" in clean:
            current = queue.rubric
            scores = clean.get("scores", current.scores)
            if queue.judge_score:
                kept = {score["name"]: score for score in scores}.get(queue.judge_score)
                wanted = judge_rubric(queue.judge_key)[1][0]
                if kept is None or any(kept.get(key) != wanted.get(key) for key in ("kind", "min", "max")):
                    raise ReviewError("scores", f"This queue calibrates a judge: its score {queue.judge_score!r} stays on the judge's scale, as it is.")
            number = (queue.rubrics.aggregate(top=Max("number"))["top"] or 0) + 1
            RubricVersion.objects.create(
                queue=queue, number=number, scores=scores, instructions=clean.get("instructions", current.instructions), created_by=user
            )
        for key in ("name", "description", "overlap", "blind", "target_width"):
            if key in clean:
                setattr(queue, key, clean[key])
        if "target_width" in clean:
            queue.stopped_at, queue.stop_reason = None, ""
        queue.save()
        if "overlap" in clean:
            Item.objects.filter(queue=queue, labels_done__gte=queue.overlap).update(done=True)
            Item.objects.filter(queue=queue, labels_done__lt=queue.overlap).update(done=False)
    return queue


def judge_rubric(judge_key: str) -> tuple[str, list[dict]]:
    """A calibrating queue's rubric: one score on the judge's own scale (right or wrong, or a 1-10 grade)."""
    low, high = scale_of(judge_key)
    if weights_for((low, high)) is None:
        return "correct", [{"name": "correct", "kind": "boolean", "instructions": "Is the answer correct? Judge it yourself, as the judge was asked to."}]
    return "grade", [
        {"name": "grade", "kind": "numeric", "min": low, "max": high, "instructions": f"Grade the answer from {low:g} to {high:g}, as the judge was asked to."}
    ]


def calibrate(project, user, judge_key: str, *, name: str = "", target_width: float | None = DEFAULT_WIDTH, overlap: int = 1) -> Queue:
    """ "Calibrate this judge": a queue of its verdicts, drawn close calls first by Neyman allocation (review/active.py),
    that stops asking once κ's interval is narrower than `target_width`."""
    if judge_key not in judge_keys_of(project):
        raise ReviewError("judge", f"No judge {str(judge_key)[:200]!r} graded anything in this project.", status_code=404)
    score_name, scores = judge_rubric(judge_key)
    found = judged.verdicts(project, judge_key)
    if not found:
        raise ReviewError("judge", "This judge has no verdict to label yet.")
    try:
        with transaction.atomic():
            queue = Queue.objects.create(
                project=project,
                created_by=user,
                name=name or f"Calibrate {judge_key}"[:100],
                judge_key=judge_key,
                judge_score=score_name,
                target_width=target_width,
                overlap=overlap,
            )
            RubricVersion.objects.create(queue=queue, number=1, scores=scores, instructions="", created_by=user)
            fill.insert(queue, found)
    except IntegrityError:
        raise ReviewError("judge", "The queue could not be filled; try again.") from None
    return queue
