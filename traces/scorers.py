"""The scorers live evaluators may name: evals' table (evals.scoring.scorers) and the one only a trace has, its trajectory."""

import math
from decimal import Decimal

from evals.scoring.base import Option, Score, Scorer, ScorerConfigError
from evals.scoring.scorers import SCORERS, named

MAX_TRAJECTORY_LIMIT = 1_000_000  # steps, tool errors or dollars: beyond any session this platform stores


class Trajectory(Scorer):
    """1 when every limit holds: the session's (or task's) steps, failed tool calls and cost, from `Item.extra`."""

    name = "trajectory"
    description = "1 when the trajectory stays within its limits: steps, failed tool calls, cost ($); at least one."
    options = {
        "max_steps": Option(0, "At most this many steps."),
        "max_tool_errors": Option(0, "At most this many failed tool calls."),
        "max_cost": Option(0.0, "At most this cost in dollars (priced by the project's deployments)."),
    }

    def check(self, options, *, references=True) -> dict:
        if not isinstance(options, dict):
            raise ScorerConfigError("The trajectory check's options are a mapping of limits.")
        if unknown := sorted(set(options) - set(self.options)):
            raise ScorerConfigError(f"The trajectory check has no option {unknown[0]!r}; its options: max_steps, max_tool_errors, max_cost.")
        limits = {k: options[k] for k in self.options if options.get(k) not in (None, "")}
        if not limits:
            raise ScorerConfigError("A trajectory check needs at least one of max_steps, max_tool_errors, max_cost.")
        try:
            checked = {k: (float(v) if k == "max_cost" else int(v)) for k, v in limits.items() if not isinstance(v, bool)}
        except (TypeError, ValueError, OverflowError):
            checked = {}
        # A limit is compared with a session's figures: NaN compares false with all of them, and a negative or
        # astronomic one is a typo; "nan" and "1e999" arrive as text, past the JSON parser's check.
        if len(checked) != len(limits) or not all(math.isfinite(v) and 0 <= v <= MAX_TRAJECTORY_LIMIT for v in checked.values()):
            raise ScorerConfigError(f"max_steps and max_tool_errors are whole numbers, max_cost a number of dollars, each from 0 to {MAX_TRAJECTORY_LIMIT:,}.")
        return checked

    async def score(self, item, options, ctx) -> Score:
        steps, tool_errors, cost = item.extra["steps"], item.extra["tool_errors"], item.extra["cost"]
        broken = []
        if "max_steps" in options and steps > options["max_steps"]:
            broken.append(f"{steps} steps > {options['max_steps']}")
        if "max_tool_errors" in options and tool_errors > options["max_tool_errors"]:
            broken.append(f"{tool_errors} tool errors > {options['max_tool_errors']}")
        if "max_cost" in options:
            if cost is None:
                broken.append("cost unknown (no priced deployment serves its model)")
            elif cost > Decimal(str(options["max_cost"])):
                broken.append(f"cost ${cost:.4f} > ${options['max_cost']}")
        detail = {"steps": steps, "tool_errors": tool_errors, "cost": str(cost) if cost is not None else None, "broken": broken}
        return Score(float(not broken), detail=detail)


TRACE_SCORERS: dict[str, Scorer] = {"trajectory": Trajectory()}


def evaluator_scorer(name) -> Scorer:
    """The scorer an evaluator names: a trace's own, or any of evals' table (looked up there each time, so a scorer
    added to it is an evaluator's too)."""
    if isinstance(name, str) and name in TRACE_SCORERS:
        return TRACE_SCORERS[name]
    return named(name, {**SCORERS, **TRACE_SCORERS})
