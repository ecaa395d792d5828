"""Where a queue stands: items, labels and what is left, per queue and per reviewer (3 queries whatever its size)."""

from statistics import median

from django.db.models import Count, Q, Sum

from .models import Item, Label, Queue

COUNTS = {
    "item_count": Count("items", distinct=True),
    "done_count": Count("items", filter=Q(items__done=True), distinct=True),
    "label_count": Sum("items__labels_done"),
}


def of_queue(queue: Queue) -> dict:
    """Items, labels and what is left; from the queue's annotations (with_counts) when it has them, else one query."""
    if hasattr(queue, "item_count"):
        counts = {"items": queue.item_count, "done": queue.done_count, "labels": queue.label_count}
    else:
        counts = Item.objects.filter(queue=queue).aggregate(items=Count("pk"), done=Count("pk", filter=Q(done=True)), labels=Sum("labels_done"))
    items, labels = counts["items"], counts["labels"] or 0
    return {
        "items": items,
        "done": counts["done"],
        "labels": labels,
        "labels_wanted": items * queue.overlap,
        "share_done": counts["done"] / items if items else None,
        "stopped": queue.stopped_at is not None,
        "stop_reason": queue.stop_reason,
    }


def of_reviewers(queue: Queue) -> list[dict]:
    """Per reviewer: labels, skips, and the median seconds a label took."""
    found = {}
    for name, skipped, seconds in Label.objects.filter(item__queue=queue).values_list("reviewer__username", "skipped", "seconds").iterator():
        mine = found.setdefault(name, {"reviewer": name, "labels": 0, "skips": 0, "seconds": []})
        mine["skips" if skipped else "labels"] += 1
        if seconds is not None and not skipped:
            mine["seconds"].append(seconds)
    for mine in found.values():
        seconds = mine.pop("seconds")
        mine["median_seconds"] = round(median(seconds), 1) if seconds else None
    return sorted(found.values(), key=lambda r: (-r["labels"], r["reviewer"]))
