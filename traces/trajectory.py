"""A session as the steps its agent took: LLM calls, tool calls and other spans, in start order.

A step is one span. Its kind says what it was: `llm` (a model call: what
`Span.is_llm` says), `tool` (a tool's execution: OpenLLMetry's
`traceloop.span.kind=tool` or the GenAI conventions' `execute_tool`
operation), or `span` (everything else: workflows, tasks, agents, HTTP…),
shown plainly. An error is any step whose span ended with status ERROR.

The messages are the ones ingest extracted (traces/messages.py), stored as
`prompt` and `completion`: they are read here, never parsed again. Where a
span's message attributes could not be read at ingest they are still among
its attributes, and are shown raw.

The page, the steps API and `bv traces show` all read `steps_page`; the run
page and the diff's totals read `summary`.
"""

import functools
import operator
import re
from dataclasses import dataclass, field
from decimal import Decimal

import orjson
from django.db.models import Case, Count, F, JSONField, Max, Min, Q, Sum, Value, When

# Prices live on the project's deployments: a span's model priced there is
# priced here. Read-only, one query per page.
from evals.models import Deployment

from .messages import INDEXED_PREFIXES, INPUT_KEY, OUTPUT_KEY, SYSTEM_KEY
from .models import ENTITY_KINDS, Span

LLM, TOOL, SPAN = "llm", "tool", "span"
KINDS = (LLM, TOOL, SPAN)
STATUS_ERROR = 2  # OTLP's STATUS_CODE_ERROR
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
MAX_SEARCH = 200
TOOL_OPERATION = "execute_tool"
# Where a tool's name, arguments and result sit in the GenAI conventions.
TOOL_NAME, TOOL_ARGUMENTS, TOOL_RESULT = "gen_ai.tool.name", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"
# Where messages come from, per side (traces/messages.py): one still among a
# span's attributes while its side has no messages is one ingest could not read.
RAW_SOURCES = {
    "prompt": ((INPUT_KEY, SYSTEM_KEY, "llm.prompts"), tuple(p for p, side in INDEXED_PREFIXES.items() if side == "prompt")),
    "completion": ((OUTPUT_KEY, "llm.completions"), tuple(p for p, side in INDEXED_PREFIXES.items() if side == "completion")),
}


class BadStepFilter(ValueError):
    status_code = 400


# The kinds as queries, so filters and counts run in the database; they say
# what `step_kind` says of one span.
IS_LLM = ~Q(span_kind__in=ENTITY_KINDS) & (Q(span_kind="llm") | ~Q(model="") | ~Q(prompt=[]))
IS_TOOL = ~IS_LLM & (Q(span_kind="tool") | Q(**{"attributes__gen_ai.operation.name": TOOL_OPERATION}))
KIND_QUERIES = {LLM: IS_LLM, TOOL: IS_TOOL, SPAN: ~IS_LLM & ~IS_TOOL}


def step_kind(span: Span) -> str:
    if span.is_llm:
        return LLM
    if span.span_kind == "tool" or span.attributes.get("gen_ai.operation.name") == TOOL_OPERATION:
        return TOOL
    return SPAN


@dataclass
class Step:
    number: int
    span: Span
    kind: str
    tool: str = ""
    prompt: list = field(default_factory=list)
    completion: list = field(default_factory=list)
    arguments: str = ""
    result: str = ""
    # Message attributes ingest could not read (or stored messages of another shape), as sent.
    raw_messages: dict = field(default_factory=dict)
    cost: Decimal | None = None
    offset_pct: float = 0.0
    width_pct: float = 100.0
    # The trajectory page's query that starts at this step (the diff links each step to it).
    page_query: str = ""

    @property
    def error(self) -> bool:
        return self.span.status_code == STATUS_ERROR

    @property
    def key(self) -> tuple[str, str]:
        """What the diff aligns on: the kind, and the tool for a tool step (a plain span: its name)."""
        return (self.kind, self.tool if self.kind == TOOL else self.span.name if self.kind == SPAN else "")

    @property
    def signature(self) -> tuple[str, str, int]:
        """The key, and what the step did (its arguments, result, answer and calls), for the diff's tie-breaks."""
        calls = tuple((c.get("name"), c.get("arguments")) for c in self.tool_calls)
        return (*self.key, hash((self.arguments, self.result, self.message, calls, self.error)))

    @property
    def message(self) -> str:
        """An LLM step's answer, for the diff: its completion's text."""
        return _contents(self.completion)

    @property
    def tool_calls(self) -> list[dict]:
        return [call for m in self.completion for call in m.get("tool_calls", [])]

    @property
    def attributes_json(self) -> str:
        return _pretty(self.span.attributes)

    @property
    def events_json(self) -> str:
        return _pretty(self.span.events) if self.span.events else ""

    def as_dict(self, detail=True) -> dict:
        """For the API; `detail` adds the span's attributes and events."""
        span = self.span
        fields = {
            "number": self.number,
            "kind": self.kind,
            "name": span.name,
            "tool": self.tool,
            "model": span.model,
            "span_id": span.span_id,
            "trace_id": span.trace_id,
            "parent_span_id": span.parent_span_id,
            "start_time": span.start_time,
            "latency_ms": span.latency_ms,
            "input_tokens": span.input_tokens,
            "output_tokens": span.output_tokens,
            "cost": None if self.cost is None else str(self.cost),
            "error": self.error,
            "status_message": span.status_message,
            "task": span.task_id,
            "prompt": self.prompt,
            "completion": self.completion,
            "arguments": self.arguments,
            "result": self.result,
            "raw_messages": self.raw_messages,
        }
        if detail:
            fields |= {"attributes": span.attributes, "events": span.events}
        return fields


def session_spans(session):
    return Span.objects.filter(project=session.project_id, session_id=session.session_id)


def filtered(spans, params, tasks=None):
    """?kind=llm|tool|span, ?task=ID, ?errors=1, ?q=text (name, messages, attributes, status)."""
    if kind := params.get("kind", ""):
        if kind not in KIND_QUERIES:
            raise BadStepFilter(f"kind must be one of {', '.join(KINDS)}, not {kind!r}.")
        spans = spans.filter(KIND_QUERIES[kind])
    if task := params.get("task", ""):
        if not task.isdecimal():
            raise BadStepFilter(f"task must be a task id, not {task!r}.")
        spans = spans.filter(task_id=int(task))
    if params.get("errors", "") in {"1", "true", "on"}:
        spans = spans.filter(status_code=STATUS_ERROR)
    if text := params.get("q", "").strip()[:MAX_SEARCH]:
        # The text as a case-insensitive regular expression of itself, not icontains: PostgreSQL's UPPER() of
        # every message in the session was most of a search's time (the query alone: 181 ms against 144 ms, bench/trajectory.py).
        pattern = re.escape(text)
        fields = ("name", "prompt", "completion", "attributes", "status_message")
        spans = spans.filter(functools.reduce(operator.or_, (Q(**{f"{name}__iregex": pattern}) for name in fields)))
    return spans


def steps_page(session, params, *, size=PAGE_SIZE, prices=None):
    """(steps, cursor of the next page or None): keyset on (start, span id), so page 200 costs what page 1 does.

    The cursor carries the number of the next step, so numbers run on across
    pages without counting the ones before.
    """
    spans = filtered(session_spans(session), params)
    number = 1
    if after := params.get("after", ""):
        try:
            start, span_id, number = after.split(".", 2)
            start, number = int(start), int(number)
        except ValueError:
            raise BadStepFilter(f"after must be a cursor from a previous page, not {after!r}.") from None
        spans = spans.filter(Q(start_unix_nano__gt=start) | Q(start_unix_nano=start, span_id__gt=span_id), start_unix_nano__gte=start)
    rows = list(spans.select_related("task").order_by("start_unix_nano", "span_id")[: size + 1])
    prices = model_prices(session.project_id) if prices is None else prices
    steps = [step_of(span, number + i, prices) for i, span in enumerate(rows[:size])]
    cursor = None
    if len(rows) > size:
        last = rows[size - 1]
        cursor = f"{last.start_unix_nano}.{last.span_id}.{number + size}"
    return steps, cursor


def all_steps(session, limit: int, prices: dict) -> list[Step]:
    """The first `limit` steps as the diff compares them: without events, resource, or an LLM call's prompt.

    An LLM call's prompt is the conversation so far, resent at every call:
    most of a long session's bytes, and the diff compares what each call
    answered. A tool step's prompt is its arguments, and is kept.
    """
    spans = session_spans(session).defer("events", "resource", "prompt")
    spans = spans.annotate(tool_prompt=Case(When(IS_LLM, then=Value([], output_field=JSONField())), default=F("prompt")))
    rows = list(spans.order_by("start_unix_nano", "span_id")[:limit])
    for span in rows:
        span.prompt = span.tool_prompt
    steps = [step_of(span, i, prices) for i, span in enumerate(rows, 1)]
    for before, step in zip(rows, steps[1:], strict=False):  # each step after the first, with the one before it
        step.page_query = f"?after={before.start_unix_nano}.{before.span_id}.{step.number}"
    return steps


def page_size(params) -> int:
    raw = params.get("page_size", "")
    if not raw:
        return PAGE_SIZE
    if not raw.isdecimal() or not 1 <= int(raw) <= MAX_PAGE_SIZE:
        raise BadStepFilter(f"page_size must be 1 to {MAX_PAGE_SIZE}.")
    return int(raw)


def model_prices(project_id) -> dict[str, Deployment]:
    priced = Deployment.objects.filter(project_id=project_id).filter(Q(input_price_per_million__isnull=False) | Q(output_price_per_million__isnull=False))
    return {d.model: d for d in priced.order_by("-created_at")}


def step_of(span: Span, number: int, prices: dict) -> Step:
    kind = step_kind(span)
    step = Step(number=number, span=span, kind=kind)
    step.prompt, raw_prompt = _messages(span.prompt)
    step.completion, raw_completion = _messages(span.completion)
    step.raw_messages = {k: v for k, v in (("prompt", raw_prompt), ("completion", raw_completion)) if v}
    attributes = span.attributes if isinstance(span.attributes, dict) else {}
    # A side that has messages read them from one source; another source beside it was not needed, not unreadable.
    unread = [RAW_SOURCES[side] for side, messages in (("prompt", step.prompt), ("completion", step.completion)) if not messages]
    for keys, prefixes in unread:
        for key, value in attributes.items():
            if key in keys or key.startswith(prefixes):
                step.raw_messages[key] = value if isinstance(value, str) else _pretty(value)
    if kind == TOOL:
        step.tool = str(attributes.get(TOOL_NAME) or attributes.get("traceloop.entity.name") or span.name.removesuffix(".tool"))
        step.arguments = _as_text(attributes.get(TOOL_ARGUMENTS)) or _contents(step.prompt)
        step.result = _as_text(attributes.get(TOOL_RESULT)) or _contents(step.completion)
    elif kind == SPAN:
        step.result = _contents(step.completion)
    if kind == LLM and (deployment := prices.get(span.model)) is not None:
        step.cost = deployment.cost(span.input_tokens or 0, span.output_tokens or 0)
    return step


def _messages(value) -> tuple[list[dict], str]:
    """(messages in the common shape, "") or ([], the stored value as text) when it is not that shape.

    Checked, not copied: the diff reads thousands of them.
    """
    if not value:
        return [], ""
    if type(value) is not list:
        return [], _as_text(value)
    for m in value:
        if type(m) is not dict or type(m.get("role", "")) is not str or type(m.get("content", "")) is not str:
            return [], _as_text(value)
        calls = m.get("tool_calls")
        if calls is not None and (type(calls) is not list or not all(type(c) is dict for c in calls)):
            return [], _as_text(value)
    return value, ""


def summary(sessions, prices=None) -> dict:
    """Steps, LLM calls, tool calls, tokens, errors, time and cost of these sessions' spans, in two queries."""
    spans = Span.objects.none()
    for session in sessions:
        spans = spans | session_spans(session)
    totals = spans.aggregate(
        steps=Count("pk"),
        llm_calls=Count("pk", filter=IS_LLM),
        tool_calls=Count("pk", filter=IS_TOOL),
        errors=Count("pk", filter=Q(status_code=STATUS_ERROR)),
        input_tokens=Sum("input_tokens"),
        output_tokens=Sum("output_tokens"),
        first=Min("start_unix_nano"),
        last=Max("end_unix_nano"),
    )
    totals["input_tokens"] = totals["input_tokens"] or 0
    totals["output_tokens"] = totals["output_tokens"] or 0
    totals["tokens"] = totals["input_tokens"] + totals["output_tokens"]
    first, last = totals.pop("first"), totals.pop("last")
    totals["duration_ms"] = (last - first) / 1e6 if totals["steps"] else 0.0
    totals["cost"] = _cost(spans, sessions, prices)
    return totals


def summary_of(spans, project_id: int, prices: dict) -> dict:
    """Steps, tool calls that failed, and cost of these spans (an evaluator's trajectory check)."""
    totals = spans.aggregate(steps=Count("pk"), tool_errors=Count("pk", filter=IS_TOOL & Q(status_code=STATUS_ERROR)))
    totals["cost"] = _priced(spans, prices)
    return totals


def _cost(spans, sessions, prices) -> Decimal | None:
    project_ids = {s.project_id for s in sessions}
    if len(project_ids) != 1:
        return None
    return _priced(spans, model_prices(project_ids.pop()) if prices is None else prices)


def _priced(spans, prices: dict) -> Decimal | None:
    """The LLM spans' tokens at the prices of the deployments serving their models; None when none is priced."""
    if not prices:
        return None
    per_model = spans.filter(IS_LLM, model__in=list(prices)).order_by().values("model").annotate(i=Sum("input_tokens"), o=Sum("output_tokens"))
    costs = [prices[row["model"]].cost(row["i"] or 0, row["o"] or 0) for row in per_model]
    return sum(costs, Decimal(0)) if costs else None


def _contents(messages: list[dict]) -> str:
    return "\n".join(m.get("content") or "" for m in messages)


def _as_text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _pretty(value)


def _pretty(value) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


def place_on_timeline(steps: list[Step], session) -> None:
    """Each step's bar: where it starts and how long it lasts, as percentages of the session's time."""
    start = int(session.first_span_at.timestamp() * 1e9)
    width = max(int(session.last_span_at.timestamp() * 1e9) - start, 1)
    for step in steps:
        step.offset_pct = min(max(100 * (step.span.start_unix_nano - start) / width, 0), 99.5)
        step.width_pct = min(max(100 * (step.span.end_unix_nano - step.span.start_unix_nano) / width, 0.5), 100 - step.offset_pct)
