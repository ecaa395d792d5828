"""Where a queue stands: items, labels and what is left, per queue and per reviewer (3 queries whatever its size)."""

from statistics import median

from django.db.models import Count, Q, Sum

from .models import Item, Label, Queue


def of_queue(queue: Queue) -> dict:
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
