"""Queue entry points: run (or resume) an eval; re-queue evals whose worker died."""

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvloop
from django.conf import settings
from django.db import close_old_connections
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from belvedir import error_share
from belvedir.core.requeue import requeue_waiting
from belvedir.sandbox.errors import SandboxError
from belvedir.sandbox.launch import layout
from billing.actions import debt_gate, refuse_if_in_debt
from billing.errors import InsufficientBalance

from . import benchmarks
from .actions import next_pass, resume_eval
from .benchmarks.base import Benchmark, DataMissing
from .code_sandbox import CodeSandboxes, code_sandbox_layout
from .datasets.evals import DatasetBenchmark
from .engine import EvalRun, StoredOutput, refresh_counters
from .models import Eval, Sample
from .queue import advance, enqueue
from .response_cache import evict
from .subset import run_order, select_rows
from .suites.cells import restamp
from .validation import deployment_problem

logger = logging.getLogger(__name__)


def run_async(coroutine):
    # uvloop: the engine spends its time in the event loop (100 sockets at
    # once); uvloop's loop roughly halves that overhead (bench/eval_engine.py).
    return uvloop.run(coroutine)


def spec_for(ev: Eval) -> Benchmark:
    if ev.dataset_id:
        return DatasetBenchmark(ev.dataset, ev.scorers, judge=ev.judge, version=ev.dataset_version)
    return benchmarks.get(ev.benchmark).configured(ev.benchmark_options).judged_by(ev.judge)


def stored_outputs(source_id: int) -> dict[int, StoredOutput]:
    """A re-scored eval's inputs: each row's outputs as its source stored them (every epoch's or completion's)."""
    stored = {}
    for index, output, completions, error in Sample.objects.filter(eval_id=source_id).values_list("row_index", "output", "completions", "error").iterator():
        outputs = tuple(c["output"] for c in completions) if completions else (output,)
        stored[index] = StoredOutput(outputs=outputs, error=error)
    return stored


@debt_gate("an eval's pass on the queue: its deployment's and judge's tokens")
def run_eval(eval_id: int):
    close_old_connections()
    if _refused_for_debt(eval_id):
        return
    now = timezone.now()
    claimed = Eval.objects.filter(pk=eval_id, status=Eval.Status.QUEUED).update(
        status=Eval.Status.RUNNING, started_at=Coalesce("started_at", Value(now)), heartbeat_at=now, status_message="", passes=F("passes") + 1
    )
    if not claimed:
        # Cancelled while it was queued (or claimed by another worker): its suite may move on all the same.
        if suite_run_id := Eval.objects.filter(pk=eval_id).values_list("suite_run_id", flat=True).first():
            advance(suite_run_id)
        return
    # Everything the engine reads from its event loop is loaded now: the ORM is off limits there.
    ev = Eval.objects.select_related("deployment", "dataset", "judge", "suite_run").get(pk=eval_id)
    try:
        _run_pass(ev)
    finally:
        if ev.suite_run_id:
            advance(ev.suite_run_id)  # its deployment's next eval, now rather than at the next scheduled look


def _refused_for_debt(eval_id: int) -> bool:
    """A project that went into debt after its eval was queued (a dispute, a refund) asks nothing more of any
    deployment: the eval fails with the reason, and resumes once the debt is paid. Its passes after the first
    are queued by the worker itself (next_pass, the reaper), so this is the gate every one of them passes."""
    project_id = Eval.objects.filter(pk=eval_id).values_list("project_id", flat=True).first()
    try:
        refuse_if_in_debt(project_id)
    except InsufficientBalance as exc:
        message = f"{exc} Resume once it is paid."
    else:
        return False
    Eval.objects.filter(pk=eval_id, status=Eval.Status.QUEUED).update(status=Eval.Status.FAILED, status_message=message, finished_at=timezone.now())
    return True


def _run_pass(ev: Eval):
    spec = spec_for(ev)
    try:
        all_rows = spec.rows()
    except DataMissing as exc:
        # Removed or changed since the eval was created: nothing was requested, and it resumes once reinstalled.
        _fail(ev, f"{exc} Resume once it is.")
        return
    if ev.benchmark_version and spec.version() != ev.benchmark_version:
        _fail(ev, f"The benchmark's data is now {spec.version()[:19]}…, not the {ev.benchmark_version[:19]}… this eval scored: its rows are not the same.")
        return
    if problem := deployment_problem(spec, ev.deployment):
        # Its deployment's API style was changed since the eval was created.
        _fail(ev, f"{problem} Resume once it is.")
        return
    indices = select_rows(len(all_rows), ev.sample_limit, ev.seed)
    Eval.objects.filter(pk=ev.pk).update(total=len(indices))
    # In the run order, not the file's: what is stored at any moment is about a prefix of it (subset.run_order).
    rows = [(i, all_rows[i]) for i in run_order(indices)]
    deadline = time.monotonic() + settings.EVAL_PASS_SECONDS
    stored_before = Sample.objects.filter(eval=ev).count()
    stored = stored_outputs(ev.rescored_from_id) if ev.rescored_from_id else None
    run = None
    try:
        if spec.sandboxed:
            with scoring_sandbox(ev, spec.sample_timeout or settings.HUMANEVAL_TIMEOUT_SECONDS) as sandbox:
                run = EvalRun(ev, spec, rows, sandbox, deadline=deadline, stored=stored)
                run_async(run.run())
        else:
            run = EvalRun(ev, spec, rows, deadline=deadline, stored=stored)
            run_async(run.run())
    except SandboxError as exc:
        _fail(ev, f"The scoring sandbox could not start: {exc.message} Resume to retry.")
    except Exception:
        logger.exception("eval %s failed", ev.pk)
        _fail(ev, "An internal error stopped this eval; finished samples are kept. Resume to continue.")
    finally:
        refresh_counters(ev.pk)
        if run is not None and run.cache is not None:
            evict(ev.project_id)
    if not finish(ev.pk) and run is not None and run.out_of_time:
        next_pass(ev, progressed=Sample.objects.filter(eval=ev).count() > stored_before)


def finish(eval_id: int) -> bool:
    """Mark a running eval succeeded once every one of its rows is stored, or once it stopped early (evals/early_stop.py:
    its rows in flight are stored by now); True if it was.

    Not just because this worker's pass ended: a worker slow enough to be
    taken for dead has its eval resumed by the reaper and claimed by another
    worker, and finds it no longer its own (it stops sending). Marking it
    succeeded then ended the other worker's pass too, with rows never stored
    (seen in tests/test_many_workers.py under load: 22 of 24).
    """
    done = Q(done_count__gte=F("total")) | Q(early_stop__has_key="reason")
    ended = Eval.objects.filter(done, pk=eval_id, status=Eval.Status.RUNNING)
    # Its counters are final here (the pass refreshed them): past the errors an eval may lose, it failed.
    if ended.filter(error_share.too_many_q("error_count", "done_count")).exists():
        return bool(ended.update(status=Eval.Status.FAILED, status_message=errors_message(eval_id), finished_at=timezone.now()))
    finished = bool(ended.update(status=Eval.Status.SUCCEEDED, finished_at=timezone.now()))
    if finished:
        restamp(eval_id)  # a suite cell: keyed with what its deployment served, for the next run to reuse
    return finished


def errors_message(eval_id: int) -> str:
    """Why an eval whose rows errored failed: how many, the limit, the first error, and what to do."""
    ev = Eval.objects.only("error_count", "done_count").get(pk=eval_id)
    first = Sample.objects.filter(eval_id=eval_id).exclude(error="").order_by("row_index").values_list("error", flat=True).first() or ""
    return (
        f"{ev.error_count} of its {ev.done_count} rows errored ({error_share.allowance(ev.error_count, ev.done_count)}): its score, of the rows "
        f"that answered, is not the benchmark's. The first error: {first[:300]} Retry the errored rows once the cause is fixed."
    )


@contextmanager
def scoring_sandbox(ev: Eval, timeout: int) -> Iterator[CodeSandboxes]:
    """The eval's scoring sandboxes, laid out for a leased host's runtime; the lease and sandboxes go when it closes."""
    slots = settings.HUMANEVAL_SLOTS

    def layout_on(place):
        return code_sandbox_layout(ev.owner, slots=slots, runtime=place.runtime)

    with layout(ev.owner, layout_on) as boxes, CodeSandboxes.opened(boxes, slots=slots, timeout=timeout) as scorer:
        yield scorer


def _fail(ev, message):
    Eval.objects.filter(pk=ev.pk, status=Eval.Status.RUNNING).update(status=Eval.Status.FAILED, status_message=message, finished_at=timezone.now())


def requeue_lost_evals() -> int:
    """Scheduled: evals queued for REQUEUE_AFTER_SECONDS whose message a killed worker took are sent again.

    One it had already claimed is running without a heartbeat instead:
    resume_stale_evals queues it again, and it scores only the rows it has not stored.
    """
    return requeue_waiting(Eval.objects.filter(status=Eval.Status.QUEUED), settings.EVAL_QUEUE, enqueue)


def resume_stale_evals() -> int:
    """An eval whose worker died (no heartbeat) resumes through the queue,
    a bounded number of times; then it ends `error` with the reason.

    Called by the sandbox reaper (the eval owner kind's `reap_stale`, see
    apps.py), which then releases the lease and removes the container of
    an eval that ended."""
    stale_before = timezone.now() - timezone.timedelta(seconds=settings.EVAL_STALE_SECONDS)
    stale = Eval.objects.filter(status=Eval.Status.RUNNING, heartbeat_at__lt=stale_before)[:50]
    resumed = 0
    for ev in stale:
        if ev.auto_resumes >= settings.EVAL_MAX_AUTO_RESUMES:
            Eval.objects.filter(pk=ev.pk, status=Eval.Status.RUNNING, heartbeat_at__lt=stale_before).update(
                status=Eval.Status.ERROR,
                finished_at=timezone.now(),
                status_message=(
                    f"Its worker stopped {ev.auto_resumes + 1} times in a row (no heartbeat for {settings.EVAL_STALE_SECONDS} s each time); "
                    "finished samples are kept. Resume to try again."
                ),
            )
        else:
            resumed += resume_eval(ev, automatic=True)
    return resumed
