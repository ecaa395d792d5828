"""Dataset rows made of traces: "this session went wrong, keep it as a test case".

A row is made of a session, or of one of its tasks:

- its input: the first user message, or the whole conversation up to a
  chosen LLM step (the messages that step's model was given, as JSON);
- its expected output: the assistant's answer there (to the first user
  message, or the step's), which a person may edit before saving;
- its metadata: the session, task, step and span it came from.

Steps are numbered as the session's trajectory numbers them unfiltered
(traces/trajectory.py, `bv traces show`): every span in start order, from 1.
Only LLM steps make conversations: a workflow or tool span's messages are a
function's arguments and result, not turns of a chat.

Many sessions make one version or none: every row is made first, and a
session that has no user message refuses the lot, naming it.
"""

import json
from dataclasses import dataclass

from belvedir.core.ids import parse_id
from evals.datasets.rows import DatasetError
from evals.datasets.versions import add_rows, new_dataset
from evals.models import Dataset, DatasetVersion

from .filters import by_user_and_metadata
from .models import Span, Task, TraceSession
from .training import conversation

FIRST_USER_MESSAGE, CONVERSATION = "first_user_message", "conversation"
INPUTS = {FIRST_USER_MESSAGE: "the first user message", CONVERSATION: "the conversation up to a step"}
# A bulk add reads every span of every session: a few hundred sessions at a time.
MAX_SESSIONS = 500
# What the session list shows at once ("add these 50"), and the API's default.
DEFAULT_LIMIT = 50


class NoUserMessage(DatasetError):
    """The session (or task) has nothing a user said: a row would have no input."""


@dataclass
class Source:
    """Which session makes a row, and how: its task, its step, and which input."""

    session: TraceSession
    task: Task | None = None
    step: int | None = None
    # The step's span instead of its number: the page's links name it so, whatever its filters numbered it.
    span_id: str = ""
    input: str = FIRST_USER_MESSAGE


def llm_steps(session: TraceSession, task: Task | None = None) -> tuple[list[tuple[int, Span]], int]:
    """The session's LLM steps as (step number, span), in the trajectory's order, and how many steps it has in all."""
    spans = Span.objects.filter(project=session.project_id, session_id=session.session_id).order_by("start_unix_nano", "span_id")
    numbered, total = [], 0
    for total, span in enumerate(spans.only("span_id", "task_id", "span_kind", "model", "prompt", "completion").iterator(chunk_size=200), 1):
        if span.is_llm and (task is None or span.task_id == task.pk):
            numbered.append((total, span))
    return numbered, total


def row_from(source: Source) -> dict:
    """A row ({"input", "expected", "metadata"}) made of a session or task; DatasetError saying why not."""
    session, task = source.session, source.task
    if source.input not in INPUTS:
        raise DatasetError(f"input is {' or '.join(INPUTS)}, not {source.input!r}.")
    if (source.step is not None or source.span_id) and source.input != CONVERSATION:
        raise DatasetError("A step chooses where a conversation ends: give input=conversation with it.")
    where = f"Session {session.session_id}" + (f", task {task.name}," if task else "")
    steps, total = llm_steps(session, task)
    if source.input == FIRST_USER_MESSAGE:
        messages = conversation([(span.prompt, span.completion) for _, span in steps])
        if (first := next((i for i, m in enumerate(messages) if m["role"] == "user" and str(m["content"]).strip()), None)) is None:
            raise NoUserMessage(f"{where} has no user message: a row needs one as its input.")
        answer = _answer_to(messages, first)
        number, span = _step_with(steps, answer)
        row = {"input": str(messages[first]["content"]), "expected": answer}
    else:
        number, span = _chosen_step(steps, total, source, where)
        before = [(s.prompt, s.completion) for n, s in steps if n < number]
        messages = conversation([*before, (span.prompt, [])])
        if not any(m["role"] == "user" and str(m["content"]).strip() for m in messages):
            raise NoUserMessage(f"{where} has no user message up to step {number}: a row needs one in its input.")
        row = {"input": messages, "expected": _said(span.completion)}
    metadata = {"source": "trace", "session_id": session.session_id, "input_from": source.input}
    task_id = task.pk if task else (span.task_id if span is not None else None)
    if task_id is not None:
        metadata["task_id"] = task_id
    if number is not None:
        metadata |= {"step": number, "span_id": span.span_id}
    return {**row, "metadata": metadata}


def _answer_to(messages: list[dict], first: int) -> str:
    """The assistant's answer to the user message at `first`: its last words before the user speaks again (after any tool calls)."""
    answer = ""
    for message in messages[first + 1 :]:
        if message["role"] == "user":
            break
        if message["role"] == "assistant" and str(message.get("content") or "").strip():
            answer = str(message["content"])
    return answer


def _step_with(steps, answer: str) -> tuple[int | None, Span | None]:
    """The LLM step whose completion says `answer`: where the expected output came from."""
    for number, span in steps:
        if answer and any(m.get("role") == "assistant" and m.get("content") == answer for m in span.completion or []):
            return number, span
    return None, None


def _chosen_step(steps, total: int, source: Source, where: str) -> tuple[int, Span]:
    """The step a conversation ends at: the one asked for (an LLM call), or the last LLM call that answered."""
    if not steps:
        raise NoUserMessage(f"{where} has no LLM call, so no conversation and no user message: a row needs one as its input.")
    if source.span_id:
        found = next(((n, s) for n, s in steps if s.span_id == source.span_id), None)
        if found is None:
            raise DatasetError(f"{where} has no LLM call with span id {source.span_id!r}{' in that task' if source.task else ''}.")
        return found
    if source.step is None:
        answered = [(n, s) for n, s in steps if _said(s.completion)]
        return (answered or steps)[-1]
    found = dict(steps).get(source.step)
    if found is None:
        if not 1 <= source.step <= total:
            raise DatasetError(f"{where} has {total} steps: there is no step {source.step}.")
        raise DatasetError(f"Step {source.step} of {where.lower()} is not an LLM call{' of that task' if source.task else ''}: a conversation ends at one.")
    return source.step, found


def _said(completion) -> str:
    """What an assistant's completion says: its text, or its tool calls as JSON when it only called tools."""
    said = [m for m in completion or [] if m.get("role") == "assistant"]
    text = "\n".join(str(m.get("content") or "") for m in said).strip()
    if text:
        return text
    calls = [call for m in said for call in m.get("tool_calls") or []]
    return json.dumps(calls, ensure_ascii=False) if calls else ""


def rows_from(sources: list[Source]) -> list[dict]:
    """Every source's row, or DatasetError naming the sessions that have none (up to five of them) and adding nothing."""
    if not sources:
        raise DatasetError("No session to make rows of: the filters match none.")
    if len(sources) > MAX_SESSIONS:
        raise DatasetError(f"At most {MAX_SESSIONS} sessions at a time; these filters match more: narrow them, or add them in parts.")
    rows, refused = [], []
    for source in sources:
        try:
            rows.append(row_from(source))
        except NoUserMessage as exc:
            refused.append((source.session.session_id, exc))
    if len(refused) == 1 and len(sources) == 1:
        raise refused[0][1]
    if refused:
        named = ", ".join(session_id for session_id, _ in refused[:5]) + (", …" if len(refused) > 5 else "")
        raise NoUserMessage(
            f"{len(refused)} of the {len(sources)} sessions have no user message to make an input of ({named}); no row was added. "
            "Leave them out (filter them away, or add sessions one by one)."
        )
    return rows


def add_to_dataset(project, user, sources: list[Source], *, dataset: Dataset | None = None, new_name: str = "", expected=None) -> DatasetVersion:
    """The sources' rows as the next version of `dataset`, or as version 1 of a new dataset named `new_name`.

    Rows are made from the spans first, then written in one transaction: all
    of them in one version, or none. `expected` replaces the one row's
    expected output (a person's edit of the answer).
    """
    if (dataset is None) == (not new_name.strip()):
        raise DatasetError("Choose a dataset to add to, or name a new one (not both).")
    rows = rows_from(sources)
    if expected is not None:
        if len(rows) != 1:
            raise DatasetError("An edited expected output is for one session's row; many sessions keep their answers.")
        rows[0]["expected"] = expected
    note = f"Row from session {sources[0].session.session_id}"[:200] if len(rows) == 1 else f"{len(rows)} rows from sessions"
    if dataset is None:
        return new_dataset(project, user, new_name.strip()[:100], rows, note=note).versions.get()
    return add_rows(dataset, user, rows, note=note)


def matching_sessions(sessions, params, limit: int = DEFAULT_LIMIT) -> list[TraceSession]:
    """The newest of `sessions` that match the session list's filters (outcome, run, user, metadata), at most `limit`."""
    if params.get("outcome") in {"success", "fail", "none"}:
        sessions = sessions.filter(outcome="" if params["outcome"] == "none" else params["outcome"])
    if run := parse_id(params.get("run")):
        sessions = sessions.filter(run_id=run)
    return list(by_user_and_metadata(sessions, params).order_by("-last_span_at", "-pk")[: min(limit, MAX_SESSIONS + 1)])
