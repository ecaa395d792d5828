"""Items into a queue: by hand (ids from any list or page), or by a filter over the project's sessions, samples or
trials (a benchmark, a deployment, an evaluator's verdict, a date range, a sample rate). An item already queued is
not queued twice; a queue holds at most MAX_ITEMS."""

import random
from datetime import datetime

from django.db import transaction
from django.db.models.functions import Random

from traces.models import EvaluatorScore
from traces.training import BadFilter, parse_bound

from .errors import ReviewError
from .items import scoped
from .models import Item, Queue

MAX_ITEMS = 200_000
MAX_IDS = 1_000
BATCH = 5_000
FILTERS = {
    Item.Kind.SAMPLE: {"eval", "benchmark", "deployment", "since", "until", "sample_rate", "errors"},
    Item.Kind.SESSION: {"evaluator", "verdict", "outcome", "since", "until", "sample_rate"},
    Item.Kind.TRIAL: {"job", "status", "since", "until", "sample_rate"},
}


def insert(queue: Queue, rows: list[dict]) -> int:
    """Queue `rows` ({kind, object_id, step?, judge_value?, stratum?}) in a random order; how many were new."""
    room = MAX_ITEMS - Item.objects.filter(queue=queue).count()
    if len(rows) > room:
        raise ReviewError("items", f"A queue holds at most {MAX_ITEMS:,} items; this one has room for {max(room, 0):,}.")
    rng = random.Random()
    before = Item.objects.filter(queue=queue).count()
    for start in range(0, len(rows), BATCH):
        Item.objects.bulk_create(
            [
                Item(
                    queue=queue,
                    kind=row["kind"],
                    object_id=row["object_id"],
                    step=row.get("step", 0),
                    judge_value=row.get("judge_value"),
                    stratum=row.get("stratum", 0),
                    # Random within a calibrating queue (a random sample of each stratum); in order added otherwise.
                    order=rng.random() if queue.judge_key else 0.0,
                )
                for row in rows[start : start + BATCH]
            ],
            ignore_conflicts=True,
        )
    return Item.objects.filter(queue=queue).count() - before


def add_items(queue: Queue, kind: str, ids, *, step: int | None = None) -> int:
    """By hand: these sessions (their `session_id`s), samples or trials (their ids); 404 naming one not in the project."""
    if kind not in Item.Kind.values:
        raise ReviewError("kind", f"An item is a {', '.join(Item.Kind.values)}, not {str(kind)[:40]!r}.")
    if not isinstance(ids, list) or not 0 < len(ids) <= MAX_IDS:
        raise ReviewError("ids", f"Give 1 to {MAX_IDS:,} ids.")
    objects = scoped(kind, queue.project)
    if kind in (Item.Kind.SESSION, Item.Kind.STEP):
        if not all(isinstance(i, str) and 0 < len(i) <= 255 for i in ids):
            raise ReviewError("ids", "A session is named by its session_id (text of 1 to 255 characters).")
        found = dict(objects.filter(session_id__in=ids).values_list("session_id", "pk"))
    else:
        if not all(isinstance(i, int) and not isinstance(i, bool) and 0 < i < 2**63 for i in ids):
            raise ReviewError("ids", f"A {kind} is named by its id (a positive whole number).")
        found = {pk: pk for pk in objects.filter(pk__in=ids).values_list("pk", flat=True)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise ReviewError("ids", f"No {kind} {str(missing[0])[:255]!r} in this project.", status_code=404)
    if kind == Item.Kind.STEP and (not isinstance(step, int) or isinstance(step, bool) or step < 1):
        raise ReviewError("step", "A step is named by its number in the session's trajectory (1 and up).")
    with transaction.atomic():
        return insert(queue, [{"kind": kind, "object_id": found[i], "step": step or 0} for i in ids])


def _when(filters: dict, name: str) -> datetime | None:
    """`since` from the start of its day, `until` to the end of its day (a time is taken as given)."""
    raw = filters.get(name)
    try:
        return parse_bound(str(raw)[:40] if raw not in (None, "") else None, end=name == "until")
    except BadFilter as exc:
        raise ReviewError(f"filters.{name}", str(exc)) from None


def matching(project, kind: str, filters: dict):
    """The project's objects of `kind` that `filters` select."""
    if kind not in FILTERS:
        raise ReviewError("kind", f"A filter fills a queue with {', '.join(FILTERS)}, not {str(kind)[:40]!r}.")
    if not isinstance(filters, dict):
        raise ReviewError("filters", "filters is an object.")
    unknown = set(filters) - FILTERS[kind]
    if unknown:
        raise ReviewError(f"filters.{sorted(unknown)[0][:50]}", f"A {kind} filter takes {', '.join(sorted(FILTERS[kind]))}.")
    since, until = _when(filters, "since"), _when(filters, "until")
    found = scoped(kind, project)
    stamp = {Item.Kind.SAMPLE: "created_at", Item.Kind.SESSION: "last_span_at", Item.Kind.TRIAL: "created_at"}[kind]
    if since:
        found = found.filter(**{f"{stamp}__gte": since})
    if until:
        found = found.filter(**{f"{stamp}__lte": until})
    text = {name: str(filters[name])[:200] for name in ("benchmark", "deployment", "verdict", "outcome", "status") if filters.get(name) not in (None, "")}
    number = {}
    for name in ("eval", "evaluator", "job"):
        if filters.get(name) not in (None, ""):
            try:
                number[name] = int(filters[name])
            except (TypeError, ValueError):
                number[name] = 0
            if not 0 < number[name] < 2**63:
                raise ReviewError(f"filters.{name}", f"{name} is an id (a positive whole number).")
    if kind == Item.Kind.SAMPLE:
        if "eval" in number:
            found = found.filter(eval_id=number["eval"])
        if "benchmark" in text:
            found = found.filter(eval__benchmark=text["benchmark"])
        if "deployment" in text:
            found = found.filter(eval__deployment__name=text["deployment"])
        if not filters.get("errors"):
            found = found.filter(error="")
    elif kind == Item.Kind.SESSION:
        if "outcome" in text:
            found = found.filter(outcome=text["outcome"])
        if "evaluator" in number:
            scores = EvaluatorScore.objects.filter(evaluator_id=number["evaluator"], evaluator__project=project, status=EvaluatorScore.Status.SCORED)
            verdict = text.get("verdict")
            if verdict not in (None, "pass", "fail"):
                raise ReviewError("filters.verdict", "verdict is pass or fail (the evaluator's).")
            if verdict:
                # An evaluator's value is 0 to 1; it passes at 0.5 and above, as its pass rate counts it (monitors.live).
                scores = scores.filter(value__gte=0.5) if verdict == "pass" else scores.filter(value__lt=0.5)
            found = found.filter(pk__in=scores.values("session_id"))
        elif "verdict" in text:
            raise ReviewError("filters.verdict", "A verdict is an evaluator's: give the evaluator too.")
    else:
        if "job" in number:
            found = found.filter(job_id=number["job"])
        if "status" in text:
            found = found.filter(status=text["status"])
    return found


def fill_by_filter(queue: Queue, kind: str, filters: dict) -> int:
    """Queue what the filter selects (at `sample_rate`, 0 to 1, drawn at random over every match); how many items were new."""
    rate = filters.get("sample_rate", 1) if isinstance(filters, dict) else 1
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= 1:
        raise ReviewError("filters.sample_rate", "sample_rate is the share queued: above 0, at most 1.")
    found = matching(queue.project, kind, filters)
    if rate < 1:  # drawn in SQL over every match, before the cap: not among the newest rows only
        found = found.annotate(draw=Random()).filter(draw__lt=rate)
    ids = list(found.order_by("-pk").values_list("pk", flat=True)[: MAX_ITEMS + 1])
    if not ids:
        return 0
    with transaction.atomic():
        return insert(queue, [{"kind": kind, "object_id": pk} for pk in ids])
