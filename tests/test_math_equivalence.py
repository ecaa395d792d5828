"""math-verify's checks run in worker processes of their own: from a django-q2 worker (a daemonic process) too, and a
stuck one is killed and replaced without losing the next check."""

import asyncio
import multiprocessing
import time

from evals.benchmarks import math_equivalence
from evals.benchmarks.math_equivalence import Checker


def check_in_a_daemon(results):
    checker = Checker()
    results.put([asyncio.run(checker.check("1/2", "so the answer is $\\boxed{0.5}$")), asyncio.run(checker.check("3", "\\boxed{4}"))])


def test_it_checks_from_a_daemonic_process_as_a_django_q2_worker_is():
    # multiprocessing refuses children to a daemonic process: a Pool here failed every math500 eval of a real worker.
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    worker = context.Process(target=check_in_a_daemon, args=(results,), daemon=True)
    worker.start()
    assert results.get(timeout=60) == [(True, "\\frac{1}{2}"), (False, "4")]
    worker.join(10)


def test_a_stuck_check_is_abandoned_its_worker_replaced_and_the_next_check_answers(monkeypatch):
    checker = Checker()
    assert asyncio.run(checker.check("2", "\\boxed{2}")) == (True, "2")  # a worker is up
    monkeypatch.setattr(math_equivalence, "ANSWER_SECONDS", 0.3)
    started = time.monotonic()
    stuck = asyncio.run(checker.check("1", "\\boxed{9^{9^{9^{9}}}} " * 200))
    assert stuck == (False, "(not checked: the comparison took over 0.3 s)") and time.monotonic() - started < 3
    monkeypatch.setattr(math_equivalence, "ANSWER_SECONDS", 20)
    assert asyncio.run(checker.check("\\frac{1}{2}", "it is 1/2, i.e. \\boxed{\\frac{2}{4}}")) == (True, "\\frac{2}{4}")
