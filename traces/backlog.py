"""How far trace storage is behind, as one web process sees it: ingest answers 503 past a limit.

A batch accepted now is readable once every batch ahead of it is stored.
The oldest waiting batch's age alone does not say when that is: it tells how
long the queue has been there, not how long it takes to drain. With 4
clients sending back to back and the cap on that age at 1.5 s, spans became
readable 3.5 s after their answer at p99 (bench/ingest.py). So each web
process also watches batches leave the table between its looks and keeps
the recent storing rate; the spans waiting over that rate is the wait a
batch accepted now would see. The larger of the two is the lag.
"""

import threading
import time
from collections import deque

from django.utils import timezone

from .models import TraceBatch

# How long a web process trusts its last look at the table.
LOOK_SECONDS = 0.1
# Storing rate over this recent window: long enough to hold many batches,
# short enough to follow processors that slow down under a burst.
RATE_WINDOW_SECONDS = 3.0
# A look counts towards the rate only this soon after the last one. A batch
# accepted after the last look and stored before this one is never seen
# leaving: over a longer stretch (a web worker the others left idle for
# seconds) the rate came out at half the processors' (6,000-11,000 spans/s
# against 14,000-16,000, bench/ingest.py at 4 clients), the wait twice the
# real one, and clients were refused while the processors ran dry. Within
# this, with the backlog anywhere near its limit, no batch comes and goes
# unseen.
MAX_STRETCH_SECONDS = 0.5
# Batches looked at per look. Past this many waiting, storage is far behind
# and the oldest batch's age says so on its own.
LOOK_LIMIT = 500


class Backlog:
    """One process's view of the waiting batches, refreshed at most every LOOK_SECONDS."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.looked_at = float("-inf")
        self.waiting: dict[int, int] = {}  # batch id -> span count
        self.oldest_received_at = None
        # (when, spans seen stored, seconds watched) per look after a busy stretch.
        self.samples: deque[tuple[float, int, float]] = deque()

    def lag(self) -> float:
        """Seconds a batch accepted now would wait before it is stored (0 when nothing waits)."""
        now = self.clock()
        if now - self.looked_at > LOOK_SECONDS:
            self.look(now)
        if self.oldest_received_at is None:
            return 0.0
        age = (timezone.now() - self.oldest_received_at).total_seconds()
        rate = self.storing_rate(now)
        queue_wait = sum(self.waiting.values()) / rate if rate else 0.0
        return max(age, queue_wait)

    def look(self, now: float):
        rows = list(TraceBatch.objects.order_by("pk").values_list("pk", "span_count", "received_at")[:LOOK_LIMIT])
        current = {pk: spans for pk, spans, _ in rows}
        # A batch past the last row this look could see may still be waiting.
        horizon = rows[-1][0] if len(rows) == LOOK_LIMIT else float("inf")
        # A rate only from a stretch the processors spent busy: a batch that
        # waited at the last look still waits, so the queue never ran dry.
        # Otherwise the stretch includes idle time (a few small batches each
        # stored at once), and its rate would understate the processors.
        watched = now - self.looked_at
        if watched <= MAX_STRETCH_SECONDS and any(pk in current for pk in self.waiting):
            gone = sum(spans for pk, spans in self.waiting.items() if pk not in current and pk <= horizon)
            self.samples.append((now, gone, watched))
        self.waiting = current
        self.oldest_received_at = rows[0][2] if rows else None
        self.looked_at = now

    def storing_rate(self, now: float) -> float | None:
        """Spans per second stored while batches waited, over the recent window; None when none was seen stored."""
        while self.samples and now - self.samples[0][0] > RATE_WINDOW_SECONDS:
            self.samples.popleft()
        stored = sum(spans for _, spans, _ in self.samples)
        # None, not 0: processors that stored nothing lately (stopped, or on
        # one huge batch) leave the oldest batch's age to tell.
        return stored / sum(watched for _, _, watched in self.samples) if stored else None


_backlog = Backlog()
# gunicorn's sync workers ask one at a time; a threaded server (runserver,
# tests' live server) would otherwise look and prune from several threads at once.
_lock = threading.Lock()


def current_lag() -> float:
    with _lock:
        return _backlog.lag()
