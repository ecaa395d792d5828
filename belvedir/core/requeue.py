"""Put queued work back on its queue when the message that carried it was lost.

django-q2's Redis broker has no acknowledgement: a cluster pops a task (and
prefetches up to `queue_limit` more) and, if it is SIGKILLed, those tasks
are gone from Redis while their rows still say queued. The database is the
record of what is owed, so a schedule sends such rows again. A second
message for a row that was not lost is harmless: the worker claims a row
with a conditional update and does nothing for a row it cannot claim.
"""

from collections.abc import Callable

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone
from django_q.brokers import get_broker

REQUEUE_BATCH = 100


def requeue_waiting(queued: QuerySet, queue: str, enqueue: Callable) -> int:
    """Send again, oldest first, rows of `queued` sent longer than REQUEUE_AFTER_SECONDS ago.

    `queued` selects the rows still waiting for a worker (a `queued_at`
    field says when each was last sent); `enqueue(row)` sends one. Only
    while the queue holds nothing in the broker: with messages waiting,
    workers are alive and behind, and a lost row's turn would not come
    sooner, while a backlog of hours would otherwise gain a duplicate of
    every row each pass. Bounded to REQUEUE_BATCH rows a call.
    """
    if get_broker(queue).queue_size():
        return 0
    now = timezone.now()
    stale = queued.filter(queued_at__lt=now - timezone.timedelta(seconds=settings.REQUEUE_AFTER_SECONDS))
    sent = 0
    for row in stale.order_by("queued_at").only("pk", "queued_at")[:REQUEUE_BATCH]:
        # Conditional on the time read: of two passes at once, one sends.
        if queued.filter(pk=row.pk, queued_at=row.queued_at).update(queued_at=now):
            enqueue(row)
            sent += 1
    return sent
