"""How many requests an eval keeps in flight: a gate whose limit moves with what the deployment answers.

A deployment's `max_in_flight` is the most it may be sent at once (up to MAX_IN_FLIGHT_CAP). The level it
keeps up with is found while the eval runs, the way TCP finds a path's window (Reno's slow start and
additive increase, multiplicative decrease: RFC 5681), with the latency signal of TCP Vegas and of Netflix's
concurrency-limits (its AIMD and gradient limits):

- It starts at the platform's documented 100, or the deployment's max_in_flight when lower: what every eval
  ran at before, so a default deployment starts where it always did and never goes above it.
- It grows while the gate is full, answers are 200s and latency holds: by one per answer (doubling every
  round trip) until it first backs off, then the same way back to 90 % of the level that failed, and past
  that by one per round trip. It returns quickly to where it worked and probes slowly past it.
- It halves what is in flight on a 429 or 503 (the server is over capacity), or at a latency knee: a round
  trip whose median latency is over twice the best one seen at a lower level. Requests then queue at least
  half their time, and by Little's law halving the level keeps the throughput while halving the wait. The
  level a knee halves to measures the best latency again: rows whose answers are longer are not load.
- One decrease per round trip: an answer to a request sent before the last decrease says nothing of the
  new level (TCP's rule).
- A request refused while the gate can still halve is sent again without using one of its attempts
  (`observe` says so): the refusal is the gate's to act on (it halves, or already has), not the request's
  failure, so probing a server's capacity loses no row. At a level of 1 the server refuses even one
  request at a time, and each refusal counts (an API out of quota still fails its rows).
- A request waiting to be sent again (its backoff, never shorter than the server's Retry-After) holds no
  slot. The gate does not close for everyone on a Retry-After: at a level of 1, an API out of quota that
  asks for 20 s per 429 would have an eval send one request per 20 s, and take hours to report it.

Why not Netflix's gradient limit alone: its smoothed latency ratio needs a queue size and a smoothing factor
per service, and an eval's answers vary in length far more than an RPC's. One knee factor and halving find a
server's capacity to within 10 % (bench/concurrency.py: 512 in flight kept, a 300-request capacity found).
"""

import asyncio
import statistics
import time
from collections import deque

from .models import MAX_IN_FLIGHT

# Where an eval starts: the documented default every deployment ran at before it could be raised.
START_LEVEL = MAX_IN_FLIGHT
# A round trip's median latency over this many times the best is a knee (see the docstring: Little's law).
KNEE = 2.0
# After a decrease, the level doubles per round trip back up to this share of where it failed.
RECOVER_TO = 0.9
# Answers the server sends when it is over capacity: each halves the level (once per round trip).
OVER_CAPACITY = {429, 503}
# The eval page's chart: a point about once a second, never more than this many (pairs are merged past it).
SAMPLE_SECONDS = 1.0
MAX_POINTS = 300


class AdaptiveLimit:
    """An asyncio gate (`async with gate:`) admitting up to `allowed` requests at once, first come first served.

    The deployment client tells it of every answer (`observe`) and waits out a retry's backoff through it
    (`backoff`), so a request waiting to be sent again gives its slot to another meanwhile.
    """

    def __init__(self, maximum: int, *, clock=time.monotonic):
        self.maximum = max(1, maximum)
        self.level = float(min(self.maximum, START_LEVEL))
        self.clock = clock
        self.in_flight = 0
        self.answered = 0  # 200s, for the chart's throughput
        self.decreases = 0
        # The level at the last decrease: recovery doubles up to RECOVER_TO of it (None: never decreased).
        self.ceiling: float | None = None
        self.changed_at = float("-inf")
        # The best round trip's median latency, and the level it was measured at (None: to be measured).
        self.best: tuple[float, int] | None = None
        # Its share of the deployment's cap beside the other evals asking it (evals/shares.py): the level allowed
        # never exceeds it, and the level grows only while it is the lower of the two.
        self.share = self.maximum
        self._demand = 0  # the most out and waiting at once since take_wanted
        self._waiters: deque[asyncio.Future] = deque()
        self._new_round()

    @property
    def allowed(self) -> int:
        return min(int(self.level), self.share)

    def take_wanted(self) -> int:
        """The share it could use by the next round trip, since it was last asked: the most it had out and waiting
        at once (a moment's dip is not a lull), up to twice its level (slow start's most) and its maximum; at least
        1. A gate halved by its server asks for no more than it can test."""
        demand, self._demand = self._demand, self.in_flight + len(self._waiters)
        return max(1, min(self.maximum, 2 * int(self.level), demand))

    def set_share(self, share: int):
        self.share = share
        self._wake()

    async def __aenter__(self):
        await self.acquire()
        return self

    async def __aexit__(self, *exc):
        self.release()

    async def acquire(self):
        self._demand = max(self._demand, self.in_flight + len(self._waiters) + 1)
        if not self._waiters and self.in_flight < self.allowed:
            self.in_flight += 1
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        self._wake()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # its slot was granted as it was cancelled: given back
            elif future in self._waiters:
                self._waiters.remove(future)
            raise

    def release(self):
        self.in_flight -= 1
        self._wake()

    async def backoff(self, delay: float):
        """A retry's wait, outside the gate: the slot is someone else's meanwhile, and taken again after it."""
        self.release()
        try:
            await asyncio.sleep(delay)
            await self.acquire()
        except asyncio.CancelledError:
            self.in_flight += 1  # the caller's `async with` gives it back on its way out
            raise

    def observe(self, status: int | None, started: float) -> bool:
        """One answer (`status` None: no answer, a connection error or a timeout) to a request sent at `started`
        (this gate's clock). False for an over-capacity answer the client is to retry without counting an
        attempt: one the gate halves for, or already did (see the module's docstring)."""
        now = self.clock()
        if status == 200:
            self.answered += 1
        if started < self.changed_at:
            return status not in OVER_CAPACITY
        if status in OVER_CAPACITY:
            at_floor = self.allowed <= 1
            self._decrease(now, knee=False)
            return at_floor
        self._round_answers += 1
        if status == 200:
            self._round_latencies.append(now - started)
            full = self.in_flight >= self.allowed or self._waiters
            if not self._round_errors and full and int(self.level) < self.share:
                self._grow()
        elif status is None or status >= 500:
            self._round_errors += 1  # no growth for the rest of this round trip
        if self._round_answers >= self._round_size:
            self._end_round(now)
        return True

    def _grow(self):
        recover_to = RECOVER_TO * self.ceiling if self.ceiling is not None else float(self.maximum)
        if self.level < recover_to:
            self.level = min(self.level + 1.0, recover_to)  # one per answer: doubling per round trip
        else:
            self.level += 1.0 / self.level  # one per round trip
        self.level = min(self.level, float(self.maximum))
        self._wake()

    def _end_round(self, now: float):
        if self._round_latencies:
            median = statistics.median(self._round_latencies)
            if self.best is None or median < self.best[0]:
                self.best = (median, self._round_level)
            elif median > KNEE * self.best[0]:
                if self._round_level > self.best[1]:
                    self._decrease(now, knee=True)
                    return
                # Slower at no higher a level: longer answers (or a busier server), not this eval's load.
                self.best = (median, self._round_level)
        self._new_round()

    def _decrease(self, now: float, *, knee: bool):
        # Half of what was in flight (RFC 5681's FlightSize), not of the level: a gate the eval did not fill says nothing.
        flight = max(1.0, min(self.level, float(self.in_flight)))
        self.ceiling = flight
        self.level = max(1.0, flight / 2)
        self.changed_at = now
        self.decreases += 1
        if knee:
            self.best = None
        self._new_round()

    def _new_round(self):
        self._round_size = self.allowed
        self._round_level = self.allowed
        self._round_answers = self._round_errors = 0
        self._round_latencies: list[float] = []

    def _wake(self):
        while self._waiters and self.in_flight < self.allowed:
            waiter = self._waiters.popleft()
            if not waiter.done():  # done: cancelled while it waited
                waiter.set_result(None)
                self.in_flight += 1


class Timeline:
    """The gate's allowed level, requests in flight and answers per second, about once a second: `Eval.concurrency`.

    Past MAX_POINTS, neighbouring points are merged and points are taken half as often, so the stored
    JSON stays a few kilobytes however long the pass runs, its points still evenly spaced.
    """

    def __init__(self, gate: AdaptiveLimit, clock=time.monotonic):
        self.gate, self.clock = gate, clock
        self.started = self.last = clock()
        self.last_answered = 0
        self.every = SAMPLE_SECONDS
        self.points: list[list[float]] = []

    def sample(self, *, final: bool = False) -> bool:
        """Take a point if one is due (or `final`); True when one was taken."""
        now = self.clock()
        if now - self.last < self.every and not (final and now > self.last):
            return False
        rate = (self.gate.answered - self.last_answered) / (now - self.last)
        self.points.append([round(now - self.started, 1), self.gate.allowed, self.gate.in_flight, round(rate, 1)])
        self.last, self.last_answered = now, self.gate.answered
        if len(self.points) >= MAX_POINTS:  # an even count (MAX_POINTS is): every point has its pair
            self.points = thinned(self.points)
            self.every *= 2
        return True


def thinned(points: list[list[float]]) -> list[list[float]]:
    """Each pair of neighbouring points as one: the later one's time, the pair's mean level, in flight and rate."""
    merged = [[b[0], *(round((x + y) / 2, 1) for x, y in zip(a[1:], b[1:], strict=True))] for a, b in zip(points[::2], points[1::2], strict=False)]
    return merged + ([points[-1]] if len(points) % 2 else [])
