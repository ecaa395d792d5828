"""Mathematical answer equivalence with math-verify, in worker processes of its own.

A completion is hostile input to a computer algebra system: `\\boxed{9^{9^{9^9}}}`
would have sympy compute for ever. math-verify bounds its parse and its
comparison with signal.alarm, which works only in a process's main thread,
so the checks run in a few worker processes (this file run as a script,
one JSON line in, one out), and one that still does
not answer in time is killed and replaced. They are plain subprocesses, not
a multiprocessing pool: an eval runs in a django-q2 worker, a daemonic
process, which multiprocessing refuses to give children (every math500 eval
failed in a real worker while the tests, running evals in threads, passed).
This module imports nothing of Django, and runs by its path, not as
`-m evals.benchmarks...`: that would import the benchmark catalog, and
with it Django's models, in every worker.
"""

import asyncio
import json
import queue
import selectors
import subprocess
import sys
import threading
from pathlib import Path

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
    """(equivalent, the answer taken from the output). Runs in a worker process."""
    # Imported here, in the worker that checks: math-verify brings sympy, 2.3 s at import, which every Django process
    # (web, workers, each management command) would otherwise pay at start, as the catalog imports this module.
    from math_verify import LatexExtractionConfig, parse, verify

    expected = parse(f"\\boxed{{{gold}}}", extraction_config=[LatexExtractionConfig()], parsing_timeout=CHECK_SECONDS)
    answer = parse(output, parsing_timeout=CHECK_SECONDS)
    if not answer or not expected:
        return False, ""
    shown = answer[-1] if isinstance(answer[-1], str) else str(answer[0])
    return bool(verify(expected, answer, timeout_seconds=CHECK_SECONDS)), shown


class Checker:
    """PROCESSES worker processes shared by every eval of this process, started on first use; a stuck one is replaced."""

    def __init__(self):
        self._idle: queue.Queue = queue.Queue()
        self._started = 0
        self._lock = threading.Lock()

    def _take(self) -> subprocess.Popen:
        with self._lock:
            if self._started < PROCESSES:
                self._started += 1
                return _worker()
        return self._idle.get()  # every worker busy: wait for one

    def _check(self, gold: str, output: str) -> tuple[bool, str]:
        worker = self._take()
        try:
            worker.stdin.write(json.dumps([gold, output]) + "\n")
            worker.stdin.flush()
            with selectors.DefaultSelector() as selector:
                selector.register(worker.stdout, selectors.EVENT_READ)
                answered = selector.select(ANSWER_SECONDS)
            line = worker.stdout.readline() if answered else ""
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            worker.kill()
            worker.wait()
            self._idle.put(_worker())
            return False, f"(not checked: the comparison took over {ANSWER_SECONDS} s)" if not answered else "(not checked: the checker stopped)"
        self._idle.put(worker)
        equivalent, shown = json.loads(line)
        return equivalent, shown

    async def check(self, gold: str, output: str) -> tuple[bool, str]:
        # In a thread: the engine's event loop goes on while a worker computes.
        return await asyncio.to_thread(self._check, gold, output)


def _worker() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )


def serve():
    """A worker: [gold, output] per line in, [equivalent, answer] per line out, in this process's main thread."""
    for line in sys.stdin:
        gold, output = json.loads(line)
        try:
            result = check(gold, output)
        except Exception:  # a completion math-verify cannot take: not equivalent, never a dead worker
            result = (False, "")
        print(json.dumps(result), flush=True)


CHECKER = Checker()

if __name__ == "__main__":
    serve()
