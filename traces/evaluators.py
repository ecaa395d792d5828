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
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Avg, Q, Sum
from django.utils import timezone
from django_q.tasks import async_task

from belvedir.core import jsonvalues
from billing.actions import debt_gate, refuse_if_in_debt
from billing.errors import InsufficientBalance
from billing.models import Account
from evals.judges import Judge, Rubric, correct_or_incorrect, rating_1_to_10
from evals.patterns import PatternError, compile_pattern
from evals.scoring import DATASET_SCORERS, ScoringError

from . import trajectory
from .models import Evaluator, EvaluatorScore, Span, Task, TraceSession
from .training import conversation

CODE_CHECKS = (*DATASET_SCORERS, "json_valid")
SCALES = {"pass_fail": (0.0, 1.0), "1-10": (1.0, 10.0)}
DEFAULT_JUDGE_PROMPT = (
    "You review an AI assistant's work. The user asked:\n{input}\n\nThe assistant answered:\n{output}\n\n"
    "Did the assistant answer helpfully and correctly? Reply with exactly one word: PASS or FAIL."
)
MAX_ATTEMPTS = 5  # a judge error is retried this many times in all, then left as an error
RETRY_AFTER = timedelta(minutes=2)
BATCH = 200  # sessions per queue task
MAX_TRAJECTORY_LIMIT = 1_000_000  # steps, tool errors or dollars: beyond any session this platform stores


class EvaluatorError(ValueError):
    """An evaluator that breaks a rule; the message names it."""

    status_code = 400


def check_config(kind: str, config, judge, daily_budget) -> dict:
    """An evaluator's scorer settings, checked; EvaluatorError naming what is wrong.

    code:       {"check": exact_match | contains | regex | json_valid | last_number, "expected": "...", "pattern": "..."}
    judge:      {"prompt": "... {input} ... {output} ...", "scale": pass_fail | 1-10}, with a judge deployment and a daily budget
    trajectory: {"max_steps": N, "max_tool_errors": N, "max_cost": dollars}, at least one
    """
    if not isinstance(config, dict):
        raise EvaluatorError("The scorer's settings are a mapping.")
    try:
        jsonvalues.check(config, "config")
    except jsonvalues.JsonValueError as exc:
        raise EvaluatorError(exc.message) from None
    if kind == Evaluator.Kind.CODE:
        check = config.get("check")
        if check not in CODE_CHECKS:
            raise EvaluatorError(f"A code evaluator's check is one of {', '.join(CODE_CHECKS)}.")
        if check in ("exact_match", "contains", "last_number") and not str(config.get("expected", "")).strip():
            raise EvaluatorError(f"The {check} check needs the expected text (expected).")
        if check == "regex":
            if not config.get("pattern"):
                raise EvaluatorError("The regex check needs a pattern.")
            try:
                compile_pattern(str(config["pattern"]))
            except PatternError as exc:
                raise EvaluatorError(f"The regex {exc}.") from None
        return {k: config[k] for k in ("check", "expected", "pattern") if k in config}
    if kind == Evaluator.Kind.JUDGE:
        if judge is None:
            raise EvaluatorError("A judge evaluator needs a judge deployment.")
        if daily_budget is None or not judge.is_priced:
            raise EvaluatorError("A judge evaluator needs a daily budget, and a judge deployment with prices to keep it.")
        scale = config.get("scale", "pass_fail")
        if scale not in SCALES:
            raise EvaluatorError(f"The judge's scale is one of {', '.join(SCALES)}.")
        prompt = config.get("prompt") or DEFAULT_JUDGE_PROMPT
        if "{output}" not in prompt:
            raise EvaluatorError("The judge's prompt must place the answer it judges: {output} (and the question: {input}).")
        return {"prompt": prompt, "scale": scale}
    if kind == Evaluator.Kind.TRAJECTORY:
        limits = {k: config[k] for k in ("max_steps", "max_tool_errors", "max_cost") if config.get(k) not in (None, "")}
        if not limits:
            raise EvaluatorError("A trajectory check needs at least one of max_steps, max_tool_errors, max_cost.")
        try:
            checked = {k: (float(v) if k == "max_cost" else int(v)) for k, v in limits.items() if not isinstance(v, bool)}
        except (TypeError, ValueError, OverflowError):
            checked = {}
        # A limit is compared with a session's figures: NaN compares false with all of them, and a negative or
        # astronomic one is a typo; "nan" and "1e999" arrive as text, past the JSON parser's check.
        if len(checked) != len(limits) or not all(math.isfinite(v) and 0 <= v <= MAX_TRAJECTORY_LIMIT for v in checked.values()):
            raise EvaluatorError(f"max_steps and max_tool_errors are whole numbers, max_cost a number of dollars, each from 0 to {MAX_TRAJECTORY_LIMIT:,}.")
        return checked
    raise EvaluatorError(f"Unknown scorer {kind!r}; choose {', '.join(Evaluator.Kind.values)}.")


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
    if evaluator.source == Evaluator.Source.PRODUCTION and session.run_id:
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


def code_score(config: dict, seen: Exchange) -> tuple[float, dict]:
    check = config["check"]
    if check == "json_valid":
        try:
            json.loads(seen.output)
        except ValueError as exc:
            return 0.0, {"answer": seen.output[:500], "why": f"not JSON: {exc}"}
        return 1.0, {"answer": seen.output[:500]}
    options = {"pattern": config["pattern"]} if check == "regex" else {}
    return DATASET_SCORERS[check](seen.output, str(config.get("expected", "")), **options), {"answer": seen.output[:500]}


def trajectory_score(config: dict, seen: Exchange) -> tuple[float, dict]:
    """1 when every limit holds; each figure and limit in the detail."""
    broken = []
    if "max_steps" in config and seen.steps > config["max_steps"]:
        broken.append(f"{seen.steps} steps > {config['max_steps']}")
    if "max_tool_errors" in config and seen.tool_errors > config["max_tool_errors"]:
        broken.append(f"{seen.tool_errors} tool errors > {config['max_tool_errors']}")
    if "max_cost" in config:
        if seen.cost is None:
            broken.append("cost unknown (no priced deployment serves its model)")
        elif seen.cost > Decimal(str(config["max_cost"])):
            broken.append(f"cost ${seen.cost:.4f} > ${config['max_cost']}")
    detail = {"steps": seen.steps, "tool_errors": seen.tool_errors, "cost": str(seen.cost) if seen.cost is not None else None, "broken": broken}
    return float(not broken), detail


def rubric_of(evaluator: Evaluator) -> Rubric:
    # The scale is in the name, which is how a calibration card knows it (evals.calibration.scale_of).
    scale = evaluator.config["scale"]
    return Rubric(name=f"evaluator-{evaluator.pk}-{scale}", version=str(evaluator.version), scale=SCALES[scale])


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
    balance = Account.balance_for(evaluator.project_id) if evaluator.kind == Evaluator.Kind.JUDGE else 0
    if balance < 0:
        skipped = {"status": EvaluatorScore.Status.SKIPPED, "error": f"Not judged: {InsufficientBalance(balance, 0)}"}
        return sum(_store(evaluator, session, task, skipped) for session, task in work)
    seen = exchanges(work, prices, figures=evaluator.kind == Evaluator.Kind.TRAJECTORY)
    if evaluator.kind == Evaluator.Kind.JUDGE:
        outcomes = asyncio.run(judge_all(evaluator, seen, spent_today(evaluator)))
    else:
        scorer = code_score if evaluator.kind == Evaluator.Kind.CODE else trajectory_score
        outcomes = [_safely(scorer, evaluator.config, one) for one in seen]
    return sum(_store(evaluator, session, task, outcome) for (session, task), outcome in zip(work, outcomes, strict=True))


def _safely(scorer, config, seen) -> dict:
    try:
        value, detail = scorer(config, seen)
    except ScoringError as exc:  # a regex past its time limit: an error, not a verdict
        return {"status": EvaluatorScore.Status.ERROR, "error": str(exc), "final": True}
    return {"status": EvaluatorScore.Status.SCORED, "value": value, "detail": detail}


async def judge_all(evaluator: Evaluator, seen: list[Exchange], spent: Decimal) -> list[dict]:
    """Each exchange judged, up to the judge's max_in_flight at once; once the day's spend (`spent` so far) reaches
    the budget the rest are skipped. No ORM in here: it runs in its own event loop."""
    judge = Judge(evaluator.judge, rubric_of(evaluator))
    budget = evaluator.daily_budget
    gate = asyncio.Semaphore(evaluator.judge.max_in_flight)
    parse = correct_verdict if evaluator.config["scale"] == "pass_fail" else rating_1_to_10

    async def one(exchange_: Exchange) -> dict:
        nonlocal spent
        async with gate:
            if budget is not None and spent >= budget:
                return {"status": EvaluatorScore.Status.SKIPPED, "error": f"Daily budget of ${budget} spent."}
            messages = [{"role": "user", "content": evaluator.config["prompt"].replace("{input}", exchange_.input).replace("{output}", exchange_.output)}]
            try:
                verdict = await judge.grade(messages, parse, {"temperature": 0, "max_tokens": 1024})
            except ScoringError as exc:
                cost = evaluator.judge.cost(*exc.usage) or Decimal(0)
                spent += cost
                return {"status": EvaluatorScore.Status.ERROR, "error": str(exc), "usage": exc.usage, "cost": cost}
            cost = evaluator.judge.cost(*verdict.usage) or Decimal(0)
            spent += cost
            return {
                "status": EvaluatorScore.Status.SCORED,
                "value": verdict.value,
                "detail": {"judge": judge.key, "reasoning": verdict.reasoning[:4000], "answer": exchange_.output[:500]},
                "usage": verdict.usage,
                "cost": cost,
            }

    try:
        return await asyncio.gather(*(one(x) for x in seen))
    finally:
        await judge.aclose()


def correct_verdict(text: str) -> float | None:
    """PASS is 1, FAIL 0 (CORRECT and INCORRECT read the same), anything else no verdict."""
    word = text.strip().split(maxsplit=1)[0].strip(".,:;!*\"'").upper() if text.strip() else ""
    return {"PASS": 1.0, "FAIL": 0.0}.get(word, correct_or_incorrect(text))


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
        if evaluator.version != score.version or evaluator.kind != Evaluator.Kind.JUDGE:
            continue
        seen = exchange(score.session, score.task, trajectory.model_prices(score.project_id))
        outcome = asyncio.run(judge_all(evaluator, [seen], spent_today(evaluator)))[0]
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
        sessions = sessions.filter(run__isnull=True)
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
    if evaluator.kind == Evaluator.Kind.JUDGE:
        past = EvaluatorScore.objects.filter(evaluator=evaluator, status=EvaluatorScore.Status.SCORED).aggregate(
            p=Avg("prompt_tokens"), c=Avg("completion_tokens")
        )
        # Without past verdicts: the prompt's words, a typical conversation's, and a short explanation.
        prompt_tokens, completion_tokens = round(past["p"] or len(evaluator.config["prompt"].split()) * 1.5 + 400), round(past["c"] or 150)
        estimate["tokens_each"] = {"prompt": prompt_tokens, "completion": completion_tokens, "from": "past verdicts" if past["p"] else "a guess"}
        estimate["cost"] = (evaluator.judge.cost(prompt_tokens, completion_tokens) or Decimal(0)) * len(todo)
    return estimate


@debt_gate("a backfill: a judge evaluator's verdicts on older sessions")
def start_backfill(evaluator: Evaluator, since: datetime, until: datetime) -> dict:
    """Queue the window's sessions for this evaluator (older than it included); the estimate it was started on.

    A judge's backfill is refused while the project is in debt (InsufficientBalance), before anything is queued."""
    if evaluator.kind == Evaluator.Kind.JUDGE:
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
    evaluator_id = params.get("evaluator", "")
    if not evaluator_id.isdigit():
        return sessions
    scores = EvaluatorScore.objects.filter(evaluator_id=int(evaluator_id))
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
