"""The eval engine: an asyncio loop that keeps up to N requests in flight.

Rows are requested concurrently, as many at once as the gate allows (its level
moves below the deployment's max_in_flight with what the deployment answers:
evals/concurrency.py), retried with backoff on 429, 5xx and connection errors
(never sooner than a Retry-After), scored as they finish, and
written in batches. A row whose sample is already stored is skipped, so a
resumed eval neither re-requests nor double-counts anything.
"""

import asyncio
import logging
import time
from dataclasses import dataclass
from decimal import Decimal

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.db import IntegrityError, connection
from django.db.models import Count, Q, Sum
from django.utils import timezone

from belvedir.core.collector import collections_spaced
from belvedir.sandbox.errors import SandboxPlatformError

from . import early_stop, loglikelihood, sample_writes, serving, shares, statistics
from .benchmarks.base import Benchmark
from .client import RequestFailed, completion_of, completion_request, http_session, loglikelihood_of, loglikelihood_request, models_entry, send_request
from .concurrency import AdaptiveLimit, Timeline
from .models import Eval, Sample, SampleAttempt
from .response_cache import ResponseCache, is_sampled, record_models_entry, served_parts
from .sample_writes import NewSample
from .scoring.base import ScoringError, Usage

logger = logging.getLogger(__name__)
BATCH_SIZE = 1000
BATCH_SECONDS = 1.0
PASS_AT_K = (1, 5, 10)


class Stopped(Exception):
    """No new request may go out (cancelled, budget or deadline): the row is left for a later pass."""


@dataclass(frozen=True)
class StoredOutput:
    """A row's outputs as another eval stored them, for re-scoring without asking the deployment (`rescored_from`)."""

    outputs: tuple[str, ...]
    error: str


class EvalRun:
    def __init__(self, ev: Eval, spec, rows: list[tuple[int, dict]], code_sandbox=None, deadline: float | None = None, stored=None):
        self.eval = ev
        # A monotonic time: past it no new request goes out (what is in flight
        # finishes and is stored), and `out_of_time` tells the task to queue the next pass.
        self.deadline = deadline
        self.out_of_time = False
        self.spec: Benchmark = spec  # a catalog benchmark or a DatasetBenchmark
        self.rows = rows
        self.code_sandbox = code_sandbox
        # Re-scoring: {row index: StoredOutput} of the source eval; None when the deployment is asked.
        self.stored: dict[int, StoredOutput] | None = stored
        self.pending: list[NewSample] = []
        self.cancelled = False
        # The gate's level, in flight and throughput over the pass, for the eval page (set by _run; None re-scoring).
        self.timeline: Timeline | None = None
        # Spending is tracked here as responses arrive, so a budget stops new
        # requests at once rather than at the next flush (hundreds may be in flight).
        self.spent = ev.cost or 0
        # What the other evals of its suite run had spent, as of the last flush (a suite's max_cost covers them
        # all): their spending in between is seen at the next flush, so a suite overshoots by at most about a
        # second of its other deployments' spending, besides what is in flight.
        self.suite_spent = suite_spent(ev.suite_run_id, excluding=ev.pk) if ev.suite_run_id else 0
        # Not for re-scoring, which asks no deployment.
        self.cache = ResponseCache.for_eval(ev) if stored is None else None
        # Whether a request went out sampled without a seed (stored once, at the next write: Eval.sampled).
        self.sampled, self._sampled_stored = ev.sampled, ev.sampled
        # What the deployment's server says of itself in its answers, stamped on the eval as the pass ends (serving.py).
        self.seen = serving.Seen()

    async def run(self):
        # The ORM calls below run in one thread of this eval's own: by default
        # every thread-sensitive call in the process shares one global thread,
        # and an eval stuck on a lock there (seen in the test suite, where
        # evals run as threads of one process) would stall every other eval.
        async with ThreadSensitiveContext():
            with collections_spaced():
                await self._run()

    async def _run(self):
        deployment = self.eval.deployment
        limit = min(deployment.max_in_flight, settings.EVAL_MAX_IN_FLIGHT)
        done = set(await sync_to_async(self._done_rows)())
        todo = [(i, row) for i, row in self.rows if i not in done]
        gate = AdaptiveLimit(limit)
        if self.stored is None:
            self.timeline = Timeline(gate)
            # Its share of the deployment's cap beside every other eval asking it, before the first request.
            await self._settle(min(gate.maximum, 2 * int(gate.level), len(todo)), held=0)
        async with http_session(limit) as client:
            if self.stored is None:
                # What the server says it serves: part of every cache key (asked once per pass, before any key is
                # made) and of the eval's serving stamp.
                entry = await models_entry(client, deployment)
                await sync_to_async(record_models_entry)(deployment, entry)
            rows_done = asyncio.Event()
            flusher = asyncio.create_task(self._flush_periodically(rows_done))
            try:
                await asyncio.gather(*(self._one(client, gate, index, row) for index, row in todo))
            finally:
                rows_done.set()
                try:
                    await flusher
                finally:
                    try:
                        await self._flush(final=True)
                        await sync_to_async(self._write_stamp)()
                    finally:
                        if self.timeline is not None:
                            await sync_to_async(shares.release)(self.eval)
                    await self.spec.aclose()
                    # The ORM ran in sync_to_async's thread: close that thread's connection too.
                    await sync_to_async(_close_connection)()

    async def _one(self, client, gate, index, row):
        if self.eval.mode == Eval.Mode.LOGLIKELIHOOD:
            return await self._one_by_loglikelihood(client, gate, index, row)
        if self.stored is not None:
            return await self._rescore_one(index, row)
        deployment = self.eval.deployment
        generation = {**self.spec.generation_for(row), **self.eval.generation}
        fields = self.spec.request_fields(row)
        replies, outputs, error = [], [], ""
        cached = 0

        async def ask(messages):
            nonlocal cached
            request = completion_request(deployment, messages, generation, fields)
            self.sampled = self.sampled or is_sampled(request.payload)
            # The request's place in its row (an epoch, a pass@k sample, a turn) is part of its key.
            key = self.cache.key(request, len(replies)) if self.cache else None
            if key and (body := await self.cache.lookup(key)) is not None:
                if self.cancelled:
                    raise Stopped
                # Answered before: no request, no turn at the gate, and no token counted as spent.
                reply = completion_of(body, deployment, None)
                cached += 1
                replies.append(reply)
                return reply
            # Each request takes its own turn at the gate (pass@k and epochs ask a row n times, MT-Bench per turn).
            async with gate:
                if self._stopped():
                    raise Stopped
                body, latency_ms = await send_request(client, deployment, request, observer=gate, seen=self.seen)
                in_flight = gate.in_flight
            reply = completion_of(body, deployment, latency_ms)
            self.seen.reply(reply.system_fingerprint, in_flight)
            self.spent += deployment.cost(reply.prompt_tokens, reply.completion_tokens) or 0
            if key:
                self.cache.keep(key, body, reply.system_fingerprint)
            replies.append(reply)
            return reply

        try:
            for _ in range(self.eval.samples_per_problem * self.eval.epochs):  # at most one of the two is above 1
                outputs.append(_clean(self.spec.output_of(await self.spec.respond(row, ask))))
        except Stopped:
            return
        except RequestFailed as exc:
            error = str(exc)
        # The gate is free as soon as the response is in; yielding once lets the
        # next request go out before this one is scored (responses arrive in
        # waves, and scoring a whole wave first would hold every slot idle).
        await asyncio.sleep(0)
        sample = self._sample(index, row, error)
        if replies:
            paid = [r for r in replies if r.latency_ms is not None]
            sample.output = outputs[0] if outputs else ""
            sample.latency_ms = paid[0].latency_ms if paid else None
            sample.prompt_tokens = _total(r.prompt_tokens for r in paid)
            sample.completion_tokens = _total(r.completion_tokens for r in paid)
            sample.cache_hits = cached
        if outputs and not error:
            await self._score_all(sample, row, outputs)
        await self._keep(sample)

    async def _rescore_one(self, index, row):
        """A row scored from the source eval's stored outputs: no request, no token of the deployment's."""
        source = self.stored.get(index)
        if source is None or source.error or not source.outputs:
            why = source.error if source is not None and source.error else "it was never scored"
            sample = self._sample(index, row, f"No stored output to re-score: in eval #{self.eval.rescored_from_id} {why}")
        else:
            sample = self._sample(index, row, "")
            sample.output = source.outputs[0]
            await self._score_all(sample, row, list(source.outputs))
        await self._keep(sample)

    async def _score_all(self, sample, row, outputs: list[str]):
        if len(outputs) > 1:
            await self._score_each(sample, row, outputs)
        else:
            await self._score(sample, row)

    async def _one_by_loglikelihood(self, client, gate, index, row):
        """One request per option, each its own turn at the gate; the benchmark scores their log-likelihoods."""
        deployment = self.eval.deployment
        options, results, error, cached = self.spec.choices(row), [], "", 0
        for attempt, option in enumerate(options):
            request = loglikelihood_request(deployment, option)
            key = self.cache.key(request, attempt) if self.cache else None
            if key and (body := await self.cache.lookup(key)) is not None:
                if self.cancelled:
                    return
                results.append(loglikelihood_of(body, option, None))
                cached += 1
                continue
            async with gate:
                if self._stopped():
                    return
                try:
                    body, latency_ms = await send_request(client, deployment, request, observer=gate, seen=self.seen)
                    results.append(loglikelihood_of(body, option, latency_ms))
                    self.seen.reply(None, gate.in_flight)
                except RequestFailed as exc:
                    error = str(exc)
                    break
            self.spent += deployment.cost(results[-1].prompt_tokens, results[-1].completion_tokens) or 0
            if key:
                self.cache.keep(key, body)
        await asyncio.sleep(0)
        sample = self._sample(index, row, error)
        if results:
            paid = [r for r in results if r.latency_ms is not None]
            sample.latency_ms = sum(r.latency_ms for r in paid) if paid else None
            sample.prompt_tokens = _total(r.prompt_tokens for r in paid)
            sample.completion_tokens = _total(r.completion_tokens for r in paid)
            sample.cache_hits = cached
        if not error:
            sample.output = loglikelihood.summary(options, results)
            result = self.spec.score_loglikelihoods(row, [r.value for r in results])
            sample.score, sample.extracted, sample.scores = result.value, result.extracted, dict(result.detail)
        await self._keep(sample)

    def _stopped(self) -> bool:
        """No new request goes out: the eval was cancelled, stopped early (evals/early_stop.py), reached its budget, or this pass its deadline."""
        if self.cancelled or self._over_budget() or early_stop.stopped_early(self.eval):
            return True
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.out_of_time = True
            return True
        return False

    def _sample(self, index, row, error) -> NewSample:
        return NewSample(
            eval_id=self.eval.pk, row_index=index, input=row.input[:20000], reference=row.reference[:20000], category=dict(row.categories), error=error
        )

    async def _keep(self, sample):
        self.pending.append(sample)
        if len(self.pending) >= BATCH_SIZE:
            await self._flush()

    def _over_budget(self) -> bool:
        # The stored rows' cost then reaches max_cost too, and refresh_counters() ends the eval as cancelled.
        if self.eval.max_cost is not None and self.spent >= self.eval.max_cost:
            return True
        budget = self.eval.suite_run.max_cost if self.eval.suite_run_id else None
        return budget is not None and self.suite_spent + self.spent >= budget

    def _judged(self, sample, usage: Usage):
        """A judge's tokens on the sample, and their cost in what the eval has spent."""
        if usage.prompt_tokens or usage.completion_tokens:
            sample.judge_prompt_tokens = (sample.judge_prompt_tokens or 0) + usage.prompt_tokens
            sample.judge_completion_tokens = (sample.judge_completion_tokens or 0) + usage.completion_tokens
            if self.eval.judge_id:
                self.spent += self.eval.judge.cost(usage.prompt_tokens, usage.completion_tokens) or 0

    async def _score(self, sample, row):
        try:
            result = await self.spec.score(row, sample.output, self.code_sandbox)
        except SandboxPlatformError as exc:
            # The platform's fault, not the completion's: an error, not a wrong answer.
            sample.score, sample.error = None, f"Sandbox error: {exc.message}"
        except ScoringError as exc:
            sample.score, sample.error = None, str(exc)
            self._judged(sample, exc.usage)
        else:
            sample.score, sample.extracted, sample.scores = result.value, result.extracted, dict(result.detail)
            if result.category is not None:
                sample.category = dict(result.category)
            self._judged(sample, result.usage)

    async def _score_each(self, sample, row, outputs: list[str]):
        """pass@k and epochs: each completion scored in turn (sandboxed one by one); the row scores their mean
        (for pass@k c/n, the unbiased pass@1; over epochs, the row's pass rate)."""
        results = []
        try:
            for output in outputs:
                results.append(await self.spec.score(row, output, self.code_sandbox))
        except SandboxPlatformError as exc:
            sample.score, sample.error = None, f"Sandbox error: {exc.message}"
            return
        except ScoringError as exc:
            sample.score, sample.error = None, str(exc)
            self._judged(sample, sum((r.usage for r in results), exc.usage))
            return
        self._judged(sample, sum((r.usage for r in results), Usage()))
        sample.completions = [
            # "detail": what the scorer said of it (a sandbox's failure), as pass@k always stored it; "scores": its parts (a judge's verdicts).
            {"output": output, "score": result.value, "passed": result.value == 1, "detail": result.extracted, "scores": dict(result.detail)}
            for output, result in zip(outputs, results, strict=True)
        ]
        sample.score, sample.extracted = statistics.mean([r.value for r in results]), results[0].extracted
        sample.scores = {"passed": sum(1 for r in results if r.value == 1), "n": len(outputs)}
        if results[0].category is not None:
            sample.category = dict(results[0].category)

    async def _flush_periodically(self, rows_done: asyncio.Event):
        # Told to stop, never cancelled: a cancel that lands while its write
        # waits for the ORM thread drops that call (asgiref cancels one not yet
        # started), and with it the batch it had taken; the eval then stayed
        # running short of its total (a loaded machine: 18/20, for good).
        while not rows_done.is_set():
            try:
                await asyncio.wait_for(rows_done.wait(), BATCH_SECONDS)
            except TimeoutError:
                await self._flush()

    async def _flush(self, final: bool = False):
        # Also a heartbeat and the cancel check, so it runs even with nothing to write.
        batch, self.pending = self.pending, []
        self.cancelled = await sync_to_async(self._write)(batch)
        if self.timeline is not None and not final:
            gate = self.timeline.gate
            if self._stopped():
                # Cancelled, out of budget or time: every row waiting at the gate (a share of 0 holds them there)
                # comes through it to find _stopped true and leave, sending nothing, so the pass ends now.
                gate.set_share(gate.maximum)
            else:
                # While the settle awaits, the gate may send up to its current share: that much is held meanwhile.
                await self._settle(gate.take_wanted(), held=max(gate.in_flight, gate.share))
        # The chart's series, about once a second (not with every BATCH_SIZE rows); copied here, as it grows on this loop.
        if self.timeline is not None and self.timeline.sample(final=final):
            await sync_to_async(self._write_chart)(list(self.timeline.points))

    async def _settle(self, wanted: int, held: int):
        # The gate is this loop's: set here, the share settled in the ORM's thread.
        self.timeline.gate.set_share(await sync_to_async(shares.settle)(self.eval, wanted=max(1, wanted), held=held))

    def _write_stamp(self):
        if self.stored is not None:
            # Re-scored: its outputs are the source eval's, and so is the stack that made them.
            stamp = Eval.objects.filter(pk=self.eval.rescored_from_id).values_list("serving_stack", flat=True).first() or {}
        else:
            stamp = self.seen.stamp(self.eval.serving_stack or {}, served_parts(self.eval.deployment.served_fingerprint)[0])
        Eval.objects.filter(pk=self.eval.pk).update(serving_stack=stamp)

    def _write_chart(self, series: list):
        Eval.objects.filter(pk=self.eval.pk).update(concurrency=series)

    def _done_rows(self):
        return list(Sample.objects.filter(eval=self.eval).values_list("row_index", flat=True))

    def _write(self, batch) -> bool:
        """Store a batch (and the answers the response cache keeps), refresh the counters; True when the eval was cancelled
        meanwhile, or stops early here or did before (decided against another eval, or precise enough: evals/early_stop.py)."""
        try:
            sample_writes.store(batch)
        except IntegrityError:
            # Not a row stored twice (skipped): the eval itself went (deleted while it ran).
            logger.warning("eval %s: a batch could not be stored", self.eval.pk, exc_info=True)
        if self.cache is not None:
            self.cache.write(self.eval.pk)
        if self.sampled and not self._sampled_stored:
            Eval.objects.filter(pk=self.eval.pk).update(sampled=True)
            self._sampled_stored = True
        refresh_counters(self.eval.pk)
        if self.eval.suite_run_id:
            self.suite_spent = suite_spent(self.eval.suite_run_id, excluding=self.eval.pk)
        if early_stop.look(self.eval):
            return True
        return not Eval.objects.filter(pk=self.eval.pk, status=Eval.Status.RUNNING).exists()


def _clean(text: str) -> str:
    return text[:100_000].replace("\x00", "")


def _total(counts) -> int | None:
    counts = [c for c in counts if c is not None]
    return sum(counts) if counts else None


def _close_connection():
    connection.close()  # looked up here, so it is this thread's connection


def refresh_counters(eval_id: int):
    """Counters, score and its interval, pass@k, tokens and cost from the stored rows (and the errored attempts
    kept when rows were retried); stops the eval at its budget, and its suite's evals at the suite's."""
    ev = Eval.objects.select_related("deployment", "judge", "suite_run").get(pk=eval_id)
    stored = Sample.objects.filter(eval_id=eval_id)
    tokens = ("prompt_tokens", "completion_tokens", "judge_prompt_tokens", "judge_completion_tokens")
    stats = stored.aggregate(
        done=Count("pk"),
        errors=Count("pk", filter=~Q(error="")),
        total_score=Sum("score", filter=Q(error="")),
        graded=Count("pk", filter=Q(error="") & ~Q(score__in=[0.0, 1.0])),
        **{name: Sum(name) for name in tokens},
    )
    retried = SampleAttempt.objects.filter(eval_id=eval_id).aggregate(**{name: Sum(name) for name in tokens})
    spent = {name: (stats[name] or 0) + (retried[name] or 0) for name in tokens}
    scored = stats["done"] - stats["errors"]
    if stats["graded"]:
        interval = statistics.bootstrap_mean(stored.filter(error="").values_list("score", flat=True))
    else:
        interval = statistics.wilson(stats["total_score"] or 0, scored) if scored else None
    cost = eval_cost(ev, **spent)
    # Rows stored since the last refresh: progress, so the stalls before it were not "in a row".
    progress = {"auto_resumes": 0} if stats["done"] > ev.done_count else {}
    Eval.objects.filter(pk=eval_id).update(
        **progress,
        **spent,
        done_count=stats["done"],
        error_count=stats["errors"],
        score=(stats["total_score"] or 0) / scored if scored else None,
        score_low=interval.low if interval else None,
        score_high=interval.high if interval else None,
        pass_at_k=_pass_at_k(stored, ev.samples_per_problem) if ev.samples_per_problem > 1 else {},
        cost=cost,
        heartbeat_at=timezone.now(),
    )
    if ev.max_cost is not None and cost is not None and cost >= ev.max_cost:
        Eval.objects.filter(pk=eval_id, status=Eval.Status.RUNNING).update(
            status=Eval.Status.CANCELLED,
            finished_at=timezone.now(),
            status_message=f"Cancelled: budget reached (${cost} of ${ev.max_cost}); finished samples are kept. Resume with a higher max_cost to continue.",
        )
    if ev.suite_run_id and ev.suite_run.max_cost is not None:
        stop_suite_at_budget(ev.suite_run)


def eval_cost(ev: Eval, prompt_tokens, completion_tokens, judge_prompt_tokens, judge_completion_tokens) -> Decimal | None:
    """The deployment's tokens at its prices plus the judge's at the judge's; None when neither is priced."""
    parts = [ev.deployment.cost(prompt_tokens, completion_tokens), ev.judge.cost(judge_prompt_tokens, judge_completion_tokens) if ev.judge_id else None]
    known = [part for part in parts if part is not None]
    return sum(known, Decimal(0)) if known else None


def suite_spent(suite_run_id: int, *, excluding: int | None = None) -> Decimal:
    """What a suite run's evals have spent, as their stored counters say."""
    return Eval.objects.filter(suite_run_id=suite_run_id).exclude(pk=excluding).aggregate(spent=Sum("cost"))["spent"] or Decimal(0)


def stop_suite_at_budget(suite_run):
    """Once a suite run's evals have spent its max_cost together, every one still going stops as cancelled."""
    spent = suite_spent(suite_run.pk)
    if spent >= suite_run.max_cost:
        Eval.objects.filter(suite_run=suite_run, status__in=Eval.ACTIVE).update(
            status=Eval.Status.CANCELLED,
            finished_at=timezone.now(),
            status_message=(
                f"Cancelled: suite run #{suite_run.pk} reached its budget (${spent:.4f} of ${suite_run.max_cost}); finished samples are kept. "
                "Resume the suite run with a higher max_cost to continue."
            ),
        )


def _pass_at_k(stored, n: int) -> dict:
    counts = [s["passed"] for s in stored.filter(error="").values_list("scores", flat=True) if "passed" in s]
    if not counts:
        return {}
    return {f"pass@{k}": statistics.mean([statistics.pass_at_k(n, c, k) for c in counts]) for k in PASS_AT_K if k <= n}
