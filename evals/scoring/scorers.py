"""The scorers every owner may name, written out: a new one is a `Scorer` and a line here.

Dataset evals and live evaluators look names up here (evaluators add the
trajectory check, which only a trace has: traces/scorers.py).
"""

from .base import Scorer, ScorerConfigError
from .checks import Contains, ExactMatch, JsonValid, LastNumber, Regex
from .judge import LlmJudge

SCORERS: dict[str, Scorer] = {
    "exact_match": ExactMatch(),
    "contains": Contains(),
    "regex": Regex(),
    "last_number": LastNumber(),
    "json_valid": JsonValid(),
    "llm_judge": LlmJudge(),
}


def named(name, table=SCORERS) -> Scorer:
    """The scorer called `name`, or ScorerConfigError listing the names there are."""
    scorer = table.get(name) if isinstance(name, str) else None
    if scorer is None:
        raise ScorerConfigError(f"Unknown scorer {name!r}; choose from {', '.join(table)}.")
    return scorer


def read_config(entry) -> tuple[str, dict, int | None]:
    """(name, options, judge deployment id) of a scorer's configuration: {"name", "options"}; or, read for one release,
    a bare name ("exact_match") and the judge's deployment beside its name ({"name": "llm_judge", "deployment": ID})."""
    if isinstance(entry, str):
        return entry, {}, None
    if not isinstance(entry, dict) or set(entry) - {"name", "options", "deployment"}:
        raise ScorerConfigError('A scorer is {"name": ..., "options": {...}}.')
    return entry.get("name"), entry.get("options", {}), entry.get("deployment")


def old_shapes(entries) -> bool:
    """Whether a list of scorer configurations uses a shape read only for one release (for the API's deprecation note)."""
    return isinstance(entries, list) and any(isinstance(e, str) or (isinstance(e, dict) and "deployment" in e) for e in entries)


DEPRECATED_SHAPES = (
    "Deprecated: a scorer as a bare name, or llm_judge's deployment beside its name, is read until the next release; "
    'send {"name": ..., "options": {...}} and the eval\'s judge as "judge".'
)
