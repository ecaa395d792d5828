"""Evaluators on live traffic: which sessions (or tasks) an evaluator takes, and scoring them.

Scoring runs on the eval queue once a session is quiet and segmented
(segmentation.py sends the sessions it finished here), never in the ingest
path, and only for sessions that began after the evaluator was made; older
ones are a backfill, an explicit action with its cost estimated first. "Began"
is when its first span arrived (the server's clock; span times are the agent's).

A sample is a function of the evaluator's seed and the session (or task): the
same seed always takes the same subset, so a rate of 0.1 is the same tenth on
every worker and every retry. A judge that cannot answer, or answers without
a verdict, leaves an error that is retried later (retry_errors), never a 0.
A judge stops at its daily budget: what is left that day is marked skipped.
"""

import asyncio
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Avg, Q, Sum
from django.utils import timezone
from django_q.tasks import async_task

from belvedir.core import jsonvalues
from belvedir.core.ids import parse_id
from billing.actions import debt_gate, refuse_if_in_debt
from billing.errors import InsufficientBalance
from billing.models import Account
from evals.scoring.base import Context, Item, ScorerConfigError, ScoringError, config
from evals.scoring.judge import SCALES, WITHOUT_REFERENCE, Judge, Rubric
from evals.scoring.scorers import SCORERS

from . import trajectory
from .models import JUDGE_SCORER, Evaluator, EvaluatorScore, Span, Task, TraceSession
from .scorers import TRACE_SCORERS, evaluator_scorer
from .training import conversation

MAX_ATTEMPTS = 5  # a judge error is retried this many times in all, then left as an error
RETRY_AFTER = timedelta(minutes=2)
BATCH = 200  # sessions per queue task


class EvaluatorError(ValueError):
    """An evaluator that breaks a rule; the message names it."""

    status_code = 400


def check_scorer(scorer, judge, daily_budget) -> dict:
    """An evaluator's scorer, {"name": ..., "options": {...}}, checked; EvaluatorError naming what is wrong.

    Any scorer of traces.scorers.evaluator_scorer: a code check (exact_match, contains, last_number and regex
    against `expected`, json_valid), llm_judge with a judge deployment and a daily budget, or trajectory.
    """
    if not isinstance(scorer, dict) or set(scorer) - {"name", "options"}:
        raise EvaluatorError('The scorer is {"name": ..., "options": {...}}.')
    try:
        jsonvalues.check(scorer, "scorer")
    except jsonvalues.JsonValueError as exc:
        raise EvaluatorError(exc.message) from None
    try:
        found = evaluator_scorer(scorer.get("name"))
        # Live traffic has no reference answer: a check against one is given it as `expected`.
        options = found.check(scorer.get("options") or {}, references=False)
    except ScorerConfigError as exc:
        raise EvaluatorError(str(exc)) from None
    if found.needs_judge:
        if judge is None:
            raise EvaluatorError("A judge evaluator needs a judge deployment.")
        if daily_budget is None or not judge.is_priced:
            raise EvaluatorError("A judge evaluator needs a daily budget, and a judge deployment with prices to keep it.")
    return config(found.name, options)


def scorer_of_kind(kind, config_) -> dict:
    """The scorer of an evaluator given the way the API took before (kind and config), read for one release:
    a code check's name is its check, a judge is llm_judge, a trajectory check is trajectory."""
    if not isinstance(config_, dict):
        raise EvaluatorError("The scorer's settings are a mapping.")
    kept = {"code": ("expected", "pattern"), "judge": ("prompt", "scale"), "trajectory": ("max_steps", "max_tool_errors", "max_cost")}
    if kind not in kept:
        raise EvaluatorError(f"Unknown scorer {kind!r}; choose code, judge or trajectory (or, from now on, a scorer by name).")
    name = {"code": config_.get("check"), "judge": JUDGE_SCORER, "trajectory": "trajectory"}[kind]
    if kind == "code" and name in (JUDGE_SCORER, "trajectory"):
        raise EvaluatorError(f"A code evaluator's check is a code check, not {name}.")
    # The old config held every field of the form: a check keeps only the options it has.
    known = TRACE_SCORERS.get(name) or SCORERS.get(name)
    return {"name": name, "options": {k: config_[k] for k in kept[kind] if k in config_ and (known is None or k in known.options)}}


def kind_and_config(scorer: dict) -> tuple[str, dict]:
    """An evaluator's scorer the way the API answered before (kind and config), for one release: scorer_of_kind's inverse."""
    name, options = scorer["name"], scorer["options"]
    if name == JUDGE_SCORER:
        return "judge", {k: options[k] for k in ("prompt", "scale") if k in options}
    if name == "trajectory":
        return "trajectory", dict(options)
    return "code", {"check": name, **{k: v for k, v in options.items() if v != ""}}


# -- which sessions and tasks --------------------------------------------------


def sampled(evaluator: Evaluator, key: str) -> bool:
    """Deterministic: the same seed and key are always in, or always out."""
    if evaluator.sample_rate >= 1:
        return True
    digest = hashlib.sha256(f"{evaluator.seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < evaluator.sample_rate


def session_matches(evaluator: Evaluator, session: TraceSession) -> bool:
    if evaluator.user_id and session.user_id != evaluator.user_id:
        return False
    if any(session.metadata.get(key) != value for key, value in (evaluator.metadata or {}).items()):
        return False
    if evaluator.outcome and session.outcome != ("" if evaluator.outcome == "none" else evaluator.outcome):
        return False
    if evaluator.source == Evaluator.Source.PRODUCTION and (session.run_id or session.trial_id):
        return False
    if evaluator.source == Evaluator.Source.HARNESS and not session.run_id:
        return False
    return not (evaluator.harness_id and (session.run is None or session.run.harness_id != evaluator.harness_id))


def targets(evaluator: Evaluator, session: TraceSession, tasks: list[Task]) -> list[Task | None]:
    """What the evaluator scores of a session: the session itself (None) or its tasks, filtered and sampled."""
    if not session_matches(evaluator, session):
        return []
    if evaluator.target == Evaluator.Target.SESSION:
        if evaluator.task_group_id and not any(t.group_id == evaluator.task_group_id for t in tasks):
            return []
        return [None] if sampled(evaluator, session.session_id) else []
    chosen = [t for t in tasks if not evaluator.task_group_id or t.group_id == evaluator.task_group_id]
    return [t for t in chosen if sampled(evaluator, f"{session.session_id}/{t.key}")]


# -- what is scored ---------------------------------------------------------------


@dataclass
class Exchange:
    """What a scorer reads of a session or task: its first user message, its last answer, its trajectory's figures."""

    input: str
    output: str
    steps: int
    tool_errors: int
    cost: Decimal | None


def exchanges(work: list[tuple[TraceSession, Task | None]], prices: dict, *, figures: bool) -> list[Exchange]:
    """What each (session, task) of `work` asked first and answered last, for all of them in two queries.

    Only the first LLM call's prompt and the last one's completion are read
    (an agent resends its whole history with every call, so the rest is
    repetition): on PostgreSQL one row per session or task each (DISTINCT ON),
    a few hundred spans for a batch of sessions instead of every span of them.
    The trajectory's figures (a query per target) only when a trajectory check reads them.
    """
    project_id = work[0][0].project_id
    spans = Span.objects.filter(project=project_id, session_id__in=list({session.session_id for session, _ in work}))
    by_task = any(task is not None for _, task in work)
    firsts, lasts = _ends(spans, "task_id" if by_task else "session_id")
    found = []
    for session, task in work:
        key = task.pk if by_task else session.session_id
        first_user = next((m["content"] for m in conversation([(firsts.get(key), None)]) if m["role"] == "user"), "")
        answer = next((m["content"] for m in reversed(conversation([(None, lasts.get(key))])) if m["role"] == "assistant"), "")
        totals = {"steps": 0, "tool_errors": 0, "cost": None}
        if figures:
            target_spans = Span.objects.filter(project=project_id, session_id=session.session_id)
            totals = trajectory.summary_of(target_spans.filter(task=task) if task else target_spans, project_id, prices)
        found.append(Exchange(_text(first_user), _text(answer), totals["steps"], totals["tool_errors"], totals["cost"]))
    return found


def _ends(spans, key: str) -> tuple[dict, dict]:
    """{session or task: the first LLM call's prompt}, {…: the last one's completion}."""
    asked, answered = spans.exclude(prompt=[]), spans.exclude(completion=[])
    if connection.vendor == "postgresql":
        firsts = asked.order_by(key, "start_unix_nano", "span_id").distinct(key).values_list(key, "prompt")
        lasts = answered.order_by(key, "-start_unix_nano", "-span_id").distinct(key).values_list(key, "completion")
        return dict(firsts), dict(lasts)
    # SQLite (development) has no DISTINCT ON: every span, keeping the ends.
    firsts, lasts = {}, {}
    for target, prompt in asked.order_by("-start_unix_nano").values_list(key, "prompt"):
        firsts[target] = prompt
    for target, completion in answered.order_by("start_unix_nano").values_list(key, "completion"):
        lasts[target] = completion
    return firsts, lasts


def exchange(session: TraceSession, task: Task | None, prices: dict) -> Exchange:
    return exchanges([(session, task)], prices, figures=True)[0]


def _text(content) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def rubric_of(evaluator: Evaluator) -> Rubric:
    # The scale is in the name, which is how a calibration card knows it (evals.scoring.calibration.scale_of).
    return Rubric(name=f"evaluator-{evaluator.pk}-{evaluator.scale}", version=str(evaluator.version), scale=SCALES[evaluator.scale])


# -- the queue --------------------------------------------------------------------


def enqueue_for(session_ids: list[int]):
    """After segmentation: the sessions of projects that have an enabled evaluator go to the eval queue, in batches."""
    projects = set(Evaluator.objects.filter(enabled=True).values_list("project_id", flat=True))
    if not projects:
        return
    wanted = list(TraceSession.objects.filter(pk__in=session_ids, project_id__in=projects).values_list("pk", flat=True))
    for start in range(0, len(wanted), BATCH):
        async_task("traces.evaluators.score_sessions", wanted[start : start + BATCH], cluster=settings.EVAL_QUEUE)


def score_sessions(session_ids: list[int], *, evaluator_id: int | None = None, backfill: bool = False) -> int:
    """Score these sessions with every enabled evaluator of their projects (or the one given); how many scores were stored."""
    sessions = TraceSession.objects.filter(pk__in=session_ids).select_related("run")
    stored = 0
    by_project: dict[int, list[TraceSession]] = {}
    for session in sessions:
        by_project.setdefault(session.project_id, []).append(session)
    for project_id, found in by_project.items():
        evaluators = Evaluator.objects.filter(project_id=project_id, enabled=True).select_related("judge")
        if evaluator_id is not None:
            evaluators = evaluators.filter(pk=evaluator_id)
        tasks: dict[int, list[Task]] = {}
        for task in Task.objects.filter(session__in=found):
            tasks.setdefault(task.session_id, []).append(task)
        prices = trajectory.model_prices(project_id)
        for evaluator in evaluators:
            work = [
                (session, task)
                for session in found
                if backfill or session.first_received_at >= evaluator.created_at
                for task in targets(evaluator, session, tasks.get(session.pk, []))
            ]
            stored += score_targets(evaluator, work, prices)
    return stored


@debt_gate("a judge evaluator's verdicts on sessions (segmented or backfilled)")
def score_targets(evaluator: Evaluator, work, prices) -> int:
    """Score each (session, task) not scored yet under this version; a judge's asked concurrently, within its budget.

    While the project is in debt a judge asks nothing: each target is stored skipped with the debt as its
    reason (shown with the scores, like a spent daily budget), once, so no task loops on it.
    """
    done = set(EvaluatorScore.objects.filter(evaluator=evaluator, version=evaluator.version).values_list("session_id", "task_id"))
    work = [(s, t) for s, t in work if (s.pk, t.pk if t else None) not in done]
    if not work:
        return 0
    balance = Account.balance_for(evaluator.project_id) if evaluator.needs_judge else 0
    if balance < 0:
        skipped = {"status": EvaluatorScore.Status.SKIPPED, "error": f"Not judged: {InsufficientBalance(balance, 0)}"}
        return sum(_store(evaluator, session, task, skipped) for session, task in work)
    seen = exchanges(work, prices, figures=evaluator.scorer["name"] == "trajectory")
    outcomes = asyncio.run(score_all(evaluator, seen, spent_today(evaluator) if evaluator.needs_judge else Decimal(0)))
    return sum(_store(evaluator, session, task, outcome) for (session, task), outcome in zip(work, outcomes, strict=True))


async def score_all(evaluator: Evaluator, seen: list[Exchange], spent: Decimal) -> list[dict]:
    """Each exchange scored by the evaluator's scorer; a judge's asked up to its max_in_flight at once, and once the
    day's spend (`spent` so far) reaches the budget the rest are skipped. No ORM in here: it runs in its own event loop."""
    scorer, options = evaluator_scorer(evaluator.scorer["name"]), evaluator.scorer["options"]
    judge = Judge(evaluator.judge, rubric_of(evaluator)) if scorer.needs_judge else None
    context, budget = Context(judge=judge), evaluator.daily_budget if judge else None
    gate = asyncio.Semaphore(evaluator.judge.max_in_flight if judge else len(seen) or 1)

    def cost_of(usage) -> Decimal | None:
        return (evaluator.judge.cost(*usage) or Decimal(0)) if judge else None

    async def one(exchange_: Exchange) -> dict:
        nonlocal spent
        async with gate:
            if budget is not None and spent >= budget:
                return {"status": EvaluatorScore.Status.SKIPPED, "error": f"Daily budget of ${budget} spent."}
            figures = {"steps": exchange_.steps, "tool_errors": exchange_.tool_errors, "cost": exchange_.cost}
            try:
                score = await scorer.score(Item(exchange_.input, exchange_.output, extra=figures), options, context)
            except ScoringError as exc:
                cost = cost_of(exc.usage)
                spent += cost or 0
                # A judge that could not answer is asked again later; a check (a regex past its time limit) would only fail again.
                return {"status": EvaluatorScore.Status.ERROR, "error": str(exc), "usage": exc.usage, "cost": cost, "final": judge is None}
            cost = cost_of(score.usage)
            spent += cost or 0
            detail = dict(score.detail) if scorer.name == "trajectory" else {**score.detail, "answer": exchange_.output[:500]}
            return {"status": EvaluatorScore.Status.SCORED, "value": score.value, "detail": detail, "usage": score.usage, "cost": cost}

    try:
        return await asyncio.gather(*(one(x) for x in seen))
    finally:
        if judge is not None:
            await judge.aclose()


def spent_today(evaluator: Evaluator) -> Decimal:
    midnight = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    return EvaluatorScore.objects.filter(evaluator=evaluator, scored_at__gte=midnight).aggregate(s=Sum("cost"))["s"] or Decimal(0)


def _store(evaluator, session, task, outcome: dict) -> bool:
    usage = outcome.get("usage") or (0, 0)
    fields = {
        "status": outcome["status"],
        "value": outcome.get("value"),
        "error": outcome.get("error", ""),
        "detail": outcome.get("detail", {}),
        "prompt_tokens": usage[0],
        "completion_tokens": usage[1],
        "cost": outcome.get("cost"),
        "scored_at": timezone.now(),
        # A check that can only fail again (a regex past its time limit) is not retried.
        "attempts": MAX_ATTEMPTS if outcome.get("final") else 1,
    }
    try:
        with transaction.atomic():
            EvaluatorScore.objects.create(
                evaluator=evaluator,
                version=evaluator.version,
                project_id=session.project_id,
                session=session,
                task=task,
                task_group_id=task.group_id if task else _group_of(session),
                session_at=session.first_span_at,
                **fields,
            )
    except IntegrityError:
        return False  # a re-delivered task scored it meanwhile
    return True


def _group_of(session) -> int | None:
    return Task.objects.filter(session=session, group__isnull=False).order_by("started_at").values_list("group_id", flat=True).first()


@debt_gate("a judge evaluator's errors asked again")
def retry_errors() -> int:
    """Scheduled: judge errors older than RETRY_AFTER are asked again, up to MAX_ATTEMPTS in all; each keeps its tokens.

    Not those of a project in debt: they wait as they are, their attempts untouched, until it is paid.
    """
    due = (
        EvaluatorScore.objects.filter(
            status=EvaluatorScore.Status.ERROR, attempts__lt=MAX_ATTEMPTS, scored_at__lte=timezone.now() - RETRY_AFTER, evaluator__enabled=True
        ).exclude(project__account__balance_cents__lt=0)
    ).select_related("evaluator", "evaluator__judge", "session", "task")[:BATCH]
    retried = 0
    for score in due:
        evaluator = score.evaluator
        if evaluator.version != score.version or not evaluator.needs_judge:
            continue
        seen = exchange(score.session, score.task, trajectory.model_prices(score.project_id))
        outcome = asyncio.run(score_all(evaluator, [seen], spent_today(evaluator)))[0]
        usage = outcome.get("usage") or (0, 0)
        EvaluatorScore.objects.filter(pk=score.pk, status=EvaluatorScore.Status.ERROR).update(
            status=outcome["status"],
            value=outcome.get("value"),
            error=outcome.get("error", ""),
            detail=outcome.get("detail", {}),
            attempts=score.attempts + 1,
            prompt_tokens=score.prompt_tokens + usage[0],
            completion_tokens=score.completion_tokens + usage[1],
            cost=(score.cost or Decimal(0)) + (outcome.get("cost") or Decimal(0)),
            scored_at=timezone.now(),
        )
        retried += 1
    return retried


# -- backfill ---------------------------------------------------------------------


def backfill_sessions(evaluator: Evaluator, since: datetime, until: datetime):
    sessions = TraceSession.objects.filter(project=evaluator.project_id, first_span_at__gte=since, first_span_at__lte=until, needs_processing=False)
    if evaluator.user_id:
        sessions = sessions.filter(user_id=evaluator.user_id)
    if evaluator.source == Evaluator.Source.PRODUCTION:
        sessions = sessions.filter(run__isnull=True, trial__isnull=True)
    elif evaluator.source == Evaluator.Source.HARNESS:
        sessions = sessions.filter(run__isnull=False)
    return sessions


def backfill_estimate(evaluator: Evaluator, since: datetime, until: datetime) -> dict:
    """What a backfill would score and cost, before it starts: sessions in the window, the share sampled, the judge's tokens."""
    if since >= until:
        raise EvaluatorError("The window's start must be before its end.")
    sessions = list(backfill_sessions(evaluator, since, until).select_related("run")[: settings.TRACE_BACKFILL_MAX_SESSIONS + 1])
    if len(sessions) > settings.TRACE_BACKFILL_MAX_SESSIONS:
        raise EvaluatorError(f"More than {settings.TRACE_BACKFILL_MAX_SESSIONS:,} sessions in this window: choose a shorter one.")
    tasks: dict[int, list[Task]] = {}
    for task in Task.objects.filter(session__in=sessions):
        tasks.setdefault(task.session_id, []).append(task)
    scored = set(EvaluatorScore.objects.filter(evaluator=evaluator, version=evaluator.version).values_list("session_id", "task_id"))
    todo = [
        (session.pk, task.pk if task else None)
        for session in sessions
        for task in targets(evaluator, session, tasks.get(session.pk, []))
        if (session.pk, task.pk if task else None) not in scored
    ]
    estimate = {"sessions": len(sessions), "to_score": len(todo), "session_ids": sorted({pk for pk, _ in todo}), "cost": None, "tokens_each": None}
    if evaluator.needs_judge:
        past = EvaluatorScore.objects.filter(evaluator=evaluator, status=EvaluatorScore.Status.SCORED).aggregate(
            p=Avg("prompt_tokens"), c=Avg("completion_tokens")
        )
        # Without past verdicts: the prompt's words, a typical conversation's, and a short explanation.
        prompt_tokens, completion_tokens = (
            round(past["p"] or len((evaluator.scorer["options"]["prompt"] or WITHOUT_REFERENCE).split()) * 1.5 + 400),
            round(past["c"] or 150),
        )
        estimate["tokens_each"] = {"prompt": prompt_tokens, "completion": completion_tokens, "from": "past verdicts" if past["p"] else "a guess"}
        estimate["cost"] = (evaluator.judge.cost(prompt_tokens, completion_tokens) or Decimal(0)) * len(todo)
    return estimate


@debt_gate("a backfill: a judge evaluator's verdicts on older sessions")
def start_backfill(evaluator: Evaluator, since: datetime, until: datetime) -> dict:
    """Queue the window's sessions for this evaluator (older than it included); the estimate it was started on.

    A judge's backfill is refused while the project is in debt (InsufficientBalance), before anything is queued."""
    if evaluator.needs_judge:
        refuse_if_in_debt(evaluator.project_id)
    estimate = backfill_estimate(evaluator, since, until)
    ids = estimate["session_ids"]
    for start in range(0, len(ids), BATCH):
        transaction.on_commit(
            lambda chunk=ids[start : start + BATCH]: async_task(
                "traces.evaluators.score_sessions", chunk, evaluator_id=evaluator.pk, backfill=True, cluster=settings.EVAL_QUEUE
            )
        )
    return estimate


def filter_by_score(sessions, params):
    """?evaluator=ID with ?score=pass|fail|error, or ?score_below=X / ?score_above=X: sessions by an evaluator's latest verdict."""
    evaluator_id = parse_id(params.get("evaluator"))
    if evaluator_id is None:
        return sessions
    scores = EvaluatorScore.objects.filter(evaluator_id=evaluator_id)
    which = params.get("score", "")
    if which == "pass":
        scores = scores.filter(status=EvaluatorScore.Status.SCORED, value__gte=1)
    elif which == "fail":
        scores = scores.filter(status=EvaluatorScore.Status.SCORED, value__lt=1)
    elif which == "error":
        scores = scores.filter(status=EvaluatorScore.Status.ERROR)
    else:
        scores = scores.filter(status=EvaluatorScore.Status.SCORED)
    for name, lookup in (("score_below", "value__lt"), ("score_above", "value__gt")):
        try:
            scores = scores.filter(**{lookup: float(params[name])}) if params.get(name) else scores
        except ValueError:
            pass
    return sessions.filter(Q(pk__in=scores.values("session_id")))
