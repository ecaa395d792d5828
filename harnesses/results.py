import json
import math
from dataclasses import dataclass

from belvedir import error_share
from belvedir.redaction import NO_SECRETS, Redactor
from belvedir.sandbox.output import clean_value


@dataclass
class ParsedResults:
    results: dict | None = None
    score: float | None = None
    model: str = ""
    error: str = ""


def parse_results(raw: bytes, redactor: Redactor = NO_SECRETS) -> ParsedResults:
    """results.json as the contract says: an object; numeric `score`; string `model`.

    Secrets are masked in the parsed value (every string, keys too), not in
    the raw text, where JSON escapes (\\u0041 for A) could spell one unseen.
    """
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        return ParsedResults(error="results.json is not UTF-8 text.")
    except json.JSONDecodeError as exc:
        return ParsedResults(error=f"results.json is not valid JSON ({exc.msg}, line {exc.lineno}).")
    except ValueError as exc:
        return ParsedResults(error=f"results.json is not valid JSON ({exc}).")
    except RecursionError:
        return ParsedResults(error="results.json is not valid here: it nests too deeply.")
    if not isinstance(data, dict):
        return ParsedResults(error=f"results.json must be a JSON object, not {type(data).__name__}.")
    try:
        # Cleaned first (NULs dropped): a secret spelt with NULs between its characters is found too.
        data = redactor.value(clean_value(data))
        parsed = ParsedResults(results=data)
    except RecursionError:
        return ParsedResults(error="results.json is not valid here: it nests too deeply.")
    score = data.get("score")
    if score is None:
        parsed.error = 'results.json has no top-level "score".'
    elif isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        parsed.error = f'"score" must be a finite number, not {json.dumps(score)[:40]}.'
    else:
        parsed.score = float(score)
    model = parsed.results.get("model")
    if isinstance(model, str):
        parsed.model = model[:200]
    return parsed


def errors_problem(results: dict | None) -> str:
    """Why a run whose command exited 0 failed all the same: its results.json counts `errors` of its `total` tasks
    past the share work may lose (belvedir/error_share.py), as the presets' drivers write them; "" if it did not."""
    counts = [(results or {}).get(key) for key in ("errors", "total")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        return ""
    errors, total = counts
    if not error_share.too_many(errors, total):
        return ""
    return (
        f"Its results.json counts {errors} errors of its {total} tasks ({error_share.allowance(errors, total)}): its score, "
        "of the tasks that answered, is not the benchmark's."
    )


def _reject_constant(name):
    raise ValueError(f"{name} is not a JSON number")
