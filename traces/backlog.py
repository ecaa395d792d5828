"""How far trace storage is behind: ingest answers 503 past a limit.

A batch accepted now is readable once every batch ahead of it is stored:
the lag is the spans waiting over the rate the processors store them at,
plus what each waiting batch costs them whatever its size (SMALL_BATCH_SPANS).
The oldest waiting batch's age does not say it. It tells how long the
queue has been there, not how long it takes to drain: with the cap on that
age at 1.5 s and 4 clients sending back to back, spans became readable 3.5 s
after their answer at p99 (bench/ingest.py). Nor is it a floor: a queue
draining after a burst has an old front and a short wait behind it (half
the refusals at 4 clients were of a 0.9 s wait for a 1.6 s-old front). The
age decides only while no processor has published a rate or a batch's cost.

Each processor measures its own rate and publishes it (`Meter`, a
`BatchProcessor` row): only a processor knows how long it worked. Web
processes once inferred the rate from batches leaving the table between
their looks, and with fewer batches waiting than processors, an idle
processor looked like a slow one: logged at each refusal at 4 clients, the
rate read 2,000-10,000 spans/s against the real 16,000-18,000, and clients
were refused with the processors half idle (bench/ingest.py).
"""

import os
import socket
import threading
import time
from collections import deque
from datetime import timedelta

from django.db.models import Avg, Count, Sum
from django.db.models.functions import Now
from django.utils import timezone

from .models import BatchProcessor, TraceBatch

# How long a web process trusts its last look at the table. Several
# processes on views this old may each let a request in past the limit;
# looking more often costs every held request a look (two queries) each time.
LOOK_SECONDS = 0.05
# Batches looked at per look. Past this many waiting, storage is far behind:
# the spans of these alone put the wait past any sensible limit.
LOOK_LIMIT = 500
# A processor's rate over its batches of this recent window: long enough to
# hold many batches, short enough to follow a processor slowed by a burst.
RATE_WINDOW_SECONDS = 3.0
# ...and over at least this many of its last batches, however old. After an
# idle spell the window would hold only the first batch back, which the burst
# that ended the spell slows most: at 4 clients, the processors' rates read
# ~5,500 spans/s in all against ~19,000, every client was told to come back
# in 4 s, and the machine sat idle for 3 of them (bench/ingest.py).
RATE_MIN_PASSES = 16
# A batch of at most this many spans costs a processor what any batch costs
# (claiming it, its queries, the commit: ~6 ms of a 1-span pass here, 85 ms
# for 1,000 spans): its time is taken as the per-batch cost, and the rate is
# measured on the larger batches with that cost taken off. A rate of spans
# over whole passes follows the batch size: 158 spans/s for 1-span batches,
# at which a single 1,000-span batch read as 3 s of backlog and the next
# request was refused with nothing behind.
SMALL_BATCH_SPANS = 10
# How often a processor refreshes its row: while storing, and while idle.
PUBLISH_SECONDS = 0.5
IDLE_PUBLISH_SECONDS = 1.0
# A row this old belongs to a processor that has stopped; one this old is deleted.
STALE_SECONDS = 5.0
FORGET_AFTER = timedelta(hours=1)


class Backlog:
    """One web process's view of the waiting batches, refreshed at most every LOOK_SECONDS."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.looked_at = float("-inf")
        self.waiting_spans = 0
        self.waiting_batches = 0
        self.oldest_received_at = None
        self.rate = None
        self.per_batch = None
        self.processors = 0

    def lag(self) -> float:
        """Seconds a batch accepted now would wait before it is stored (0 when nothing waits)."""
        now = self.clock()
        if now - self.looked_at > LOOK_SECONDS:
            self.look()
            self.looked_at = now
        if self.oldest_received_at is None:
            return 0.0
        if self.rate or self.per_batch:
            # The processors share the batches: each batch's own cost is
            # spread over them, as their spans are over their summed rates.
            spans = self.waiting_spans / self.rate if self.rate else 0.0
            return spans + self.waiting_batches * (self.per_batch or 0.0) / self.processors
        # No processor running, or none has stored yet: only the age tells.
        return (timezone.now() - self.oldest_received_at).total_seconds()

    def look(self):
        rows = list(TraceBatch.objects.order_by("pk").values_list("span_count", "received_at")[:LOOK_LIMIT])
        self.waiting_spans = sum(spans for spans, _ in rows)
        self.waiting_batches = len(rows)
        self.oldest_received_at = rows[0][1] if rows else None
        # The database's clock, the one the rows were stamped with: a web
        # machine's clock may be off from the processors'.
        live = BatchProcessor.objects.filter(seen_at__gte=Now() - timedelta(seconds=STALE_SECONDS))
        figures = live.aggregate(rate=Sum("spans_per_second"), per_batch=Avg("seconds_per_batch"), processors=Count("pk"))
        self.rate, self.per_batch, self.processors = figures["rate"], figures["per_batch"], figures["processors"]


_backlog = Backlog()
# gunicorn's sync workers ask one at a time; a threaded server (runserver,
# tests' live server) would otherwise look from several threads at once.
_lock = threading.Lock()


def current_lag() -> float:
    with _lock:
        return _backlog.lag()


class Meter:
    """One processor's storing rate and per-batch cost over its recent batches, published as its `BatchProcessor` row."""

    def __init__(self, name: str | None = None, clock=time.monotonic):
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.clock = clock
        self.passes: deque[tuple[float, int, float]] = deque()  # (when, spans, seconds)
        # The last figures measured: an idle processor stores about as fast as it last did.
        self.rate = None
        self.per_batch = None
        self.published_at = float("-inf")

    def stored(self, spans: int, seconds: float):
        """Note a pass that stored `spans` in `seconds` (claim to commit), and publish when due."""
        now = self.clock()
        self.passes.append((now, spans, seconds))
        while len(self.passes) > RATE_MIN_PASSES and now - self.passes[0][0] > RATE_WINDOW_SECONDS:
            self.passes.popleft()
        if small := [took for _, count, took in self.passes if count <= SMALL_BATCH_SPANS]:
            self.per_batch = sum(small) / len(small)
        larger = [(count, took) for _, count, took in self.passes if count > SMALL_BATCH_SPANS]
        busy = sum(took for _, took in larger) - len(larger) * (self.per_batch or 0.0)
        if busy > 0:
            self.rate = sum(count for count, _ in larger) / busy
        self.publish(PUBLISH_SECONDS)

    def publish(self, every: float = IDLE_PUBLISH_SECONDS):
        """Refresh this processor's row if it is `every` seconds old (idle: that it is alive)."""
        now = self.clock()
        if self.published_at == float("-inf"):
            # Processors killed (never retired) leave rows behind: the first to start after clears them.
            BatchProcessor.objects.filter(seen_at__lt=Now() - FORGET_AFTER).delete()
        if now - self.published_at >= every:
            fields = {"spans_per_second": self.rate, "seconds_per_batch": self.per_batch, "seen_at": Now()}
            if not BatchProcessor.objects.filter(name=self.name).update(**fields):
                BatchProcessor.objects.create(name=self.name, **fields)
            self.published_at = now

    def retire(self):
        BatchProcessor.objects.filter(name=self.name).delete()
