"""Mathematical answer equivalence with math-verify, in worker processes of its own.

A completion is hostile input to a computer algebra system: `\\boxed{9^{9^{9^9}}}`
would have sympy compute for ever. math-verify bounds its parse and its
comparison with signal.alarm, which works only in a process's main thread,
so the checks run in a small pool of processes (their main threads), and one
that still does not answer in time has the pool replaced. This module
imports nothing of Django: the pool's processes import only it.
"""

import asyncio
import multiprocessing
import threading

from math_verify import LatexExtractionConfig, parse, verify

CHECK_SECONDS = 5  # math-verify's own bound on each parse and on the comparison
ANSWER_SECONDS = 3 * CHECK_SECONDS + 5  # then the process is taken for stuck
PROCESSES = 2


def gold_of(solution: str) -> str:
    """The content of the last \\boxed{...} (or \\fbox{...}) in a solution, braces balanced; "" when none."""
    start = max(solution.rfind("\\boxed{"), solution.rfind("\\fbox{"))
    if start < 0:
        return ""
    i = solution.index("{", start) + 1
    depth, begin = 1, i
    while i < len(solution) and depth:
        depth += {"{": 1, "}": -1}.get(solution[i], 0)
        i += 1
    return solution[begin : i - 1] if depth == 0 else ""


def check(gold: str, output: str) -> tuple[bool, str]:
    """(equivalent, the answer taken from the output). Runs in a pool process."""
    expected = parse(f"\\boxed{{{gold}}}", extraction_config=[LatexExtractionConfig()], parsing_timeout=CHECK_SECONDS)
    answer = parse(output, parsing_timeout=CHECK_SECONDS)
    if not answer or not expected:
        return False, ""
    shown = answer[-1] if isinstance(answer[-1], str) else str(answer[0])
    return bool(verify(expected, answer, timeout_seconds=CHECK_SECONDS)), shown


class Checker:
    """A process pool shared by every eval of this process; replaced whole when one of its processes is stuck."""

    def __init__(self):
        self._pool = None
        self._lock = threading.Lock()

    def _current(self):
        with self._lock:
            if self._pool is None:
                # spawn, not fork: the eval worker has threads (the engine's, the ORM's) whose locks a fork would copy held.
                self._pool = multiprocessing.get_context("spawn").Pool(PROCESSES)
            return self._pool

    def _replace(self, pool):
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.terminate()

    async def check(self, gold: str, output: str) -> tuple[bool, str]:
        pool = self._current()
        loop = asyncio.get_running_loop()
        answered = loop.create_future()

        def deliver(setter, value):
            loop.call_soon_threadsafe(lambda: answered.done() or setter(value))

        pool.apply_async(check, (gold, output), callback=lambda r: deliver(answered.set_result, r), error_callback=lambda e: deliver(answered.set_exception, e))
        try:
            return await asyncio.wait_for(answered, ANSWER_SECONDS)
        except TimeoutError:
            self._replace(pool)
            return False, f"(not checked: the comparison took over {ANSWER_SECONDS} s)"


CHECKER = Checker()
