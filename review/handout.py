"""Items handed to reviewers, one reviewer at a time, and their labels taken exactly once per overlap slot.

`next_item` takes the first open item the reviewer has not answered that no one else holds, with
SELECT … FOR UPDATE SKIP LOCKED, so two reviewers asking at once are handed two different items; the holder keeps
it for HOLD. A calibrating queue draws from the stratum active calibration names (review/active.py), and stops
handing out once the judge's κ is known to the width asked. `submit` takes a label under the item's row lock: a
label past the item's overlap (a hold that expired while another reviewer labelled it) is refused as taken (409),
and the reviewer's answer is sent back with the refusal, so nothing they typed is lost.
"""

from datetime import timedelta

from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from evals.scoring.calibration import scale_of

from . import active, judged
from .errors import ReviewError, Taken
from .models import Item, Label, Queue
from .rubric import clean_values

HOLD = timedelta(minutes=15)


def _open_for(queue: Queue, user, now):
    answered = Label.objects.filter(item=OuterRef("pk"), reviewer=user)
    return Item.objects.filter(queue=queue, done=False).filter(Q(held_by__isnull=True) | Q(held_until__lte=now)).filter(~Exists(answered))


def next_item(queue: Queue, user) -> Item | None:
    """The item this reviewer labels next (the one they already hold, if any), or None when none is left for them."""
    now = timezone.now()
    with transaction.atomic():
        held = Item.objects.filter(queue=queue, held_by=user, held_until__gt=now, done=False).exclude(labels__reviewer=user).order_by("pk").first()
        if held is not None:
            return held
        if queue.stopped_at:
            return None
        for stratum in _strata(queue):
            candidates = _open_for(queue, user, now)
            if stratum is not None:
                candidates = candidates.filter(stratum=stratum)
            item = candidates.order_by("order", "pk").select_for_update(skip_locked=True, of=("self",)).first()
            if item is not None:
                Item.objects.filter(pk=item.pk).update(held_by=user, held_until=now + HOLD)
                item.held_by, item.held_until = user, now + HOLD
                return item
    return None


def _strata(queue: Queue) -> list:
    """The order to look in: active calibration's stratum first, then the other; stratum by stratum for other queues
    too, so that each search walks the (queue, stratum, order) index instead of sorting the queue."""
    if not queue.target_width:
        # A judge's queue with no width to reach: one random order over both strata (a plain random sample).
        return [None] if queue.judge_key else [active.SURE, active.CLOSE]
    sizes = judged.population(queue)
    labelled = {}
    for stratum, n in (
        Label.objects.filter(item__queue=queue, skipped=False).values_list("item__stratum").annotate(n=Count("pk")).values_list("item__stratum", "n")
    ):
        labelled[stratum] = (n, 0)
    judge_values, people, strata = judged.queue_evidence(queue)
    scale = scale_of(queue.judge_key)
    for stratum in labelled:
        disagreed = sum(1 for j, h, s in zip(judge_values, people, strata, strict=True) if s == stratum and active.disagrees(j, h, scale))
        labelled[stratum] = (labelled[stratum][0], disagreed)
    first = active.next_stratum(sizes, labelled, list(sizes))
    return [first, *(h for h in sorted(sizes) if h != first)]


def submit(queue: Queue, item: Item, user, raw_values, *, seconds: float | None = None) -> Label:
    """Take the reviewer's label of `item` (their second answer replaces their first); Taken when it is no longer theirs to label."""
    rubric = queue.rubric
    values = clean_values(rubric.scores, raw_values)
    with transaction.atomic():
        item = Item.objects.select_for_update().get(pk=item.pk, queue=queue)
        mine = Label.objects.filter(item=item, reviewer=user).first()
        if mine is not None and not mine.skipped:
            mine.values, mine.rubric = values, rubric
            mine.save(update_fields=["values", "rubric"])
            return mine
        now = timezone.now()
        if item.done:
            raise Taken(
                "item",
                f"This item already has the {queue.overlap} label{'s' if queue.overlap > 1 else ''} the queue asks for: it was taken while you held it. Your answer was not stored; it is below.",
            )
        held_by_another = item.held_by_id not in (None, user.pk) and item.held_until and item.held_until > now
        if held_by_another and item.labels_done + 1 >= queue.overlap:  # the last label it needs is the holder's
            raise Taken("item", "Another reviewer holds this item now. Your answer was not stored; it is below.")
        if mine is not None:  # a skip, now answered after all
            mine.delete()
        label = Label.objects.create(item=item, reviewer=user, rubric=rubric, values=values, seconds=seconds)
        item.labels_done += 1
        item.done = item.labels_done >= queue.overlap
        if not held_by_another:
            item.held_by, item.held_until = None, None
        item.save(update_fields=["labels_done", "done", "held_by", "held_until"])
    if queue.target_width and not queue.stopped_at:
        _stop_when_known(queue)
    return label


def skip(queue: Queue, item: Item, user) -> None:
    """Pass on an item: it is not handed to this reviewer again, and is free for the others at once."""
    with transaction.atomic():
        item = Item.objects.select_for_update().get(pk=item.pk, queue=queue)
        if Label.objects.filter(item=item, reviewer=user).exists():
            raise ReviewError("item", "You already answered this item.")
        Label.objects.create(item=item, reviewer=user, rubric=queue.rubric, skipped=True)
        if item.held_by_id == user.pk:
            Item.objects.filter(pk=item.pk).update(held_by=None, held_until=None)


def _stop_when_known(queue: Queue) -> None:
    found = judged.estimate(queue)
    if found["enough"]:
        reason = (
            f"κ = {found['kappa']:.2f} [{found['low']:.2f}, {found['high']:.2f}] after {found['n']} labels: narrower than the {queue.target_width:g} asked."
        )
        Queue.objects.filter(pk=queue.pk, stopped_at__isnull=True).update(stopped_at=timezone.now(), stop_reason=reason)
        queue.stopped_at, queue.stop_reason = timezone.now(), reason


def previous(queue: Queue, user, before: Item | None = None) -> Item | None:
    """The item this reviewer labelled before `before` (or last of all), to look at or change their label."""
    labels = Label.objects.filter(item__queue=queue, reviewer=user, skipped=False)
    if before is not None:
        mine = labels.filter(item=before).first()
        labels = labels.filter(created_at__lt=mine.created_at) if mine else labels
    label = labels.order_by("-created_at", "-pk").select_related("item").first()
    return label.item if label else None
