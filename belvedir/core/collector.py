"""The cyclic garbage collector, held back where the hot paths allocate faster than it pays to scan.

Reference counting frees almost everything these paths make; the collector
only finds cycles, and by default it runs after every 700 net allocations,
each tenth of those runs over the middle generation too. Paths that
allocate hundreds of thousands of short-lived objects (a batch of spans, an
eval's requests) spend a third of their time there.
"""

import gc
import threading
from contextlib import contextmanager

# An eval's pass: the youngest generation collected after this many allocations (not 700), the older ones more
# rarely still. At 512 requests in flight the engine spent 0.35 of its 0.95 ms of CPU a row in the collector
# (bench/eval_engine.py: 0.59-0.69 ms a row so).
SPACED = (20_000, 50, 1_000)

_lock = threading.Lock()
_spacing = 0
_default: tuple[int, int, int] | None = None


@contextmanager
def collector_paused():
    """Run a block without the cyclic garbage collector.

    Parsing 1,000 spans allocates ~100,000 dicts and lists, none in cycles;
    with the collector on, that triggers full collections over the whole
    process mid-request (a third of parse time, and the slowest requests).
    Reference counting still frees everything; the collector runs after.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def collections_spaced():
    """Run a long block (hours, so never without the collector) with collections spaced out (SPACED).

    Process-wide, as the collector is: the first block in sets it, the last one out puts back what was there
    before, however blocks on several threads (evals run as threads in the test suite) interleave.
    """
    global _spacing, _default
    with _lock:
        if _spacing == 0:
            _default = gc.get_threshold()
            gc.set_threshold(*SPACED)
        _spacing += 1
    try:
        yield
    finally:
        with _lock:
            _spacing -= 1
            if _spacing == 0:
                gc.set_threshold(*_default)
