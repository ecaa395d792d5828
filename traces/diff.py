"""Two trajectories side by side: their steps aligned, the first divergence marked, what changed per step.

The alignment is Needleman–Wunsch on the steps' keys (kind, and tool name
for a tool step), not difflib.SequenceMatcher. A trajectory is the same few
keys over and over ("llm, tool bash, llm, tool bash…"): SequenceMatcher
takes the longest matching block first and recurses on either side, which
with keys this repetitive can pin the first block anywhere, and past 200
items its autojunk heuristic drops every key that makes up more than 1% of
the sequence, so "llm" itself is ignored. It also has no notion of "the same
kind of step with another tool", which is exactly a changed step here.
Needleman–Wunsch gives the best global alignment under a stated score:

- same key and the same content (arguments, result, answer): +3;
- same key: +2 (compared field by field afterwards);
- same kind, other tool: 0 (a changed tool beats a deletion and an insertion);
- other kinds: -3 (worse than two gaps, so an LLM call never pairs with a tool call);
- a step on one side only: -1.

The content point only breaks ties between equal keys: with ten LLM calls
on one side and eleven on the other, the one left over is the one whose
answer the other side never gave, not whichever the traceback meets first.

Each row of the score matrix is computed at once with numpy (the left-gap
recurrence is a running maximum), so two 1,000-step sessions align in
milliseconds (bench/trajectory.py); the common prefix and suffix are matched
before that, so a rerun that diverges late costs little more than reading it.
"""

import numpy as np

from .trajectory import LLM, TOOL, all_steps, model_prices, summary

GAP = -1
# By how many leading parts of two items agree: nothing, the kind, the key (kind and tool), the content too.
SCORES = (-3, 0, 2, 3)
DIAG, UP, LEFT = 0, 1, 2
# Steps compared per side: the pointer matrix is one byte per pair of steps.
MAX_DIFF_STEPS = 3000
SAME, CHANGED_STEP, ONLY_A, ONLY_B = "same", "changed", "only_a", "only_b"


def align(a: list, b: list) -> list[tuple[int | None, int | None]]:
    """Pairs of indexes into a and b (None where a step is on one side only), in order.

    Items are (kind, name) or (kind, name, content) tuples, scored by how many leading parts agree (SCORES).
    """
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    middle = _needleman_wunsch(a[head : len(a) - tail], b[head : len(b) - tail])
    pairs = [(i, i) for i in range(head)]
    pairs += [(None if i is None else head + i, None if j is None else head + j) for i, j in middle]
    pairs += [(len(a) - tail + k, len(b) - tail + k) for k in range(tail)]
    return pairs


def _needleman_wunsch(a: list, b: list) -> list[tuple[int | None, int | None]]:
    n, m = len(a), len(b)
    if not n or not m:
        return [(i, None) for i in range(n)] + [(None, j) for j in range(m)]
    # Each prefix of the items as small ints, so a row's scores are a few array comparisons.
    depth = max(len(k) for k in a + b)
    levels = []
    for level in range(1, depth + 1):
        ids: dict = {}
        levels.append((np.array([ids.setdefault(k[:level], len(ids)) for k in a]), np.array([ids.setdefault(k[:level], len(ids)) for k in b])))
    columns = np.arange(m + 1) * GAP
    pointers = np.empty((n + 1, m + 1), dtype=np.uint8)
    pointers[0, :] = LEFT
    pointers[:, 0] = UP
    previous = columns.copy()
    best = np.empty(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        score = np.full(m, SCORES[0])
        for level, (a_ids, b_ids) in enumerate(levels, 1):
            score[b_ids == a_ids[i - 1]] = SCORES[level]
        diagonal = previous[:-1] + score
        up = previous[1:] + GAP
        best[0] = i * GAP
        best[1:] = np.maximum(diagonal, up)
        # current[j] = max(best[j], current[j-1] + GAP), for all j at once: a
        # running maximum of best[k] - GAP*k, shifted back.
        current = np.maximum.accumulate(best - columns) + columns
        row = np.where(diagonal >= up, DIAG, UP).astype(np.uint8)
        pointers[i, 1:] = np.where(current[1:] > best[1:], LEFT, row)
        previous = current
    pairs, i, j = [], n, m
    while i or j:
        move = pointers[i, j]
        if move == DIAG:
            i, j = i - 1, j - 1
            pairs.append((i, j))
        elif move == UP:
            i -= 1
            pairs.append((i, None))
        else:
            j -= 1
            pairs.append((None, j))
    pairs.reverse()
    return pairs


def changes(a, b) -> list[str]:
    """What differs between two aligned steps: tool, arguments, result, message, model."""
    found = []
    if a.kind == TOOL:
        found += [name for name, x, y in (("tool", a.tool, b.tool), ("arguments", a.arguments, b.arguments), ("result", a.result, b.result)) if x != y]
    elif a.kind == LLM:
        calls_a, calls_b = a.tool_calls, b.tool_calls
        if [c.get("name") for c in calls_a] != [c.get("name") for c in calls_b]:
            found.append("tool")
        if [c.get("arguments") for c in calls_a] != [c.get("arguments") for c in calls_b]:
            found.append("arguments")
        if a.message != b.message:
            found.append("message")
        if a.span.model != b.span.model:
            found.append("model")
    else:
        if a.span.name != b.span.name:
            found.append("name")
        if a.result != b.result:
            found.append("result")
    if a.error != b.error:
        found.append("error")
    return found


def diff(session_a, session_b) -> dict:
    """Rows of aligned steps, the index of the first that differs (None when none does), and each side's totals."""
    # Both sides are of one project (the views scope them): one price list.
    prices = model_prices(session_a.project_id)
    steps_a, steps_b = all_steps(session_a, MAX_DIFF_STEPS, prices), all_steps(session_b, MAX_DIFF_STEPS, prices)
    rows = []
    for i, j in align([s.signature for s in steps_a], [s.signature for s in steps_b]):
        a = None if i is None else steps_a[i]
        b = None if j is None else steps_b[j]
        if a is None:
            status, changed = ONLY_B, []
        elif b is None:
            status, changed = ONLY_A, []
        else:
            changed = changes(a, b)
            status = CHANGED_STEP if changed else SAME
        rows.append({"status": status, "a": a, "b": b, "pair": (a, b), "changes": changed})
    first = next((k for k, row in enumerate(rows) if row["status"] != SAME), None)
    totals = []
    for session in (session_a, session_b):
        side = summary([session], prices)
        side["outcome"] = session.outcome
        side["session_id"] = session.session_id
        totals.append(side)
    truncated = max(session_a.span_count, session_b.span_count) > MAX_DIFF_STEPS
    return {"rows": rows, "first_divergence": first, "a": totals[0], "b": totals[1], "truncated": truncated, "max_steps": MAX_DIFF_STEPS}


def as_dict(result: dict) -> dict:
    """The diff for the API: steps as dicts, numbers as they were on each side."""
    rows = [
        {
            "status": row["status"],
            "changes": row["changes"],
            "a": _step(row["a"]),
            "b": _step(row["b"]),
        }
        for row in result["rows"]
    ]
    totals = [{**side, "cost": None if side["cost"] is None else str(side["cost"])} for side in (result["a"], result["b"])]
    return {**result, "rows": rows, "a": totals[0], "b": totals[1]}


def _step(step) -> dict | None:
    # Attributes, events and an LLM call's prompt stay on the steps API: a diff compares what each step did.
    if step is None:
        return None
    fields = step.as_dict(detail=False)
    if step.kind == LLM:
        del fields["prompt"]
    return fields


# Of a run of identical rows, the page shows this many at each end; the API gives them all.
CONTEXT_ROWS = 2


def collapsed(rows: list[dict]) -> list[dict]:
    """The rows for the page: runs of identical steps cut to their ends, with how many were left out, as a text diff shows context."""
    out, run = [], []

    def flush():
        if len(run) > 2 * CONTEXT_ROWS + 1:
            out.extend(run[:CONTEXT_ROWS])
            out.append({"status": "gap", "hidden": len(run) - 2 * CONTEXT_ROWS})
            out.extend(run[-CONTEXT_ROWS:])
        else:
            out.extend(run)
        run.clear()

    for number, row in enumerate(rows, 1):
        row["row"] = number
        if row["status"] == SAME:
            run.append(row)
        else:
            flush()
            out.append(row)
    flush()
    return out
