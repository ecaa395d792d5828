"""A rubric: the named scores a reviewer gives, checked before anything is stored, and a label checked against it.

Every bound is here so that no rubric or label costs more than its size: 30 scores, 10,000 characters of
instructions, 50 labels a categorical score, 5,000 characters of free text.
"""

import math

from .errors import ReviewError

KINDS = ("numeric", "categorical", "boolean", "text")
MAX_SCORES = 30
MAX_INSTRUCTIONS = 10_000
MAX_SCORE_INSTRUCTIONS = 2_000
MAX_CATEGORIES = 50
MAX_TEXT = 5_000
# Keys 1-9 pick a numeric grade or a category on the review page: a wider numeric range is typed.
KEYED = 9


def clean_scores(raw) -> list[dict]:
    """The rubric's scores in their stored shape; ReviewError naming `scores[i].field` for the first thing wrong."""
    if not isinstance(raw, list) or not raw:
        raise ReviewError("scores", "A rubric is a list of 1 to 30 scores, each {name, kind, ...}.")
    if len(raw) > MAX_SCORES:
        raise ReviewError("scores", f"A rubric has at most {MAX_SCORES} scores; this one has {len(raw):,}.")
    scores, names = [], set()
    for i, score in enumerate(raw):
        where = f"scores[{i}]"
        if not isinstance(score, dict):
            raise ReviewError(where, "Each score is an object: {name, kind, min, max, labels, instructions}.")
        unknown = set(score) - {"name", "kind", "min", "max", "labels", "instructions"}
        if unknown:
            raise ReviewError(
                f"{where}.{sorted(unknown)[0]}", f"A score takes name, kind, min, max, labels and instructions, not {', '.join(sorted(unknown))}."
            )
        name = score.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 50:
            raise ReviewError(f"{where}.name", "A score's name is 1 to 50 characters.")
        name = name.strip()
        if name in names:
            raise ReviewError(f"{where}.name", f"Two scores are named {name!r}.")
        names.add(name)
        kind = score.get("kind")
        if kind not in KINDS:
            raise ReviewError(f"{where}.kind", f"A score's kind is one of {', '.join(KINDS)}, not {str(kind)[:40]!r}.")
        instructions = score.get("instructions", "")
        if not isinstance(instructions, str) or len(instructions) > MAX_SCORE_INSTRUCTIONS:
            raise ReviewError(f"{where}.instructions", f"A score's instructions are text of at most {MAX_SCORE_INSTRUCTIONS:,} characters.")
        clean = {"name": name, "kind": kind, "instructions": instructions}
        if kind == "numeric":
            low, high = score.get("min"), score.get("max")
            for field, value in (("min", low), ("max", high)):
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or abs(value) > 1e6:
                    raise ReviewError(f"{where}.{field}", "A numeric score's min and max are numbers within ±1,000,000.")
            if low >= high:
                raise ReviewError(f"{where}.max", f"max ({high:g}) must be above min ({low:g}).")
            clean.update(min=low, max=high)
        elif "min" in score or "max" in score:
            raise ReviewError(f"{where}.min", f"A {kind} score has no range: min and max belong to numeric scores.")
        if kind == "categorical":
            labels = score.get("labels")
            if not isinstance(labels, list) or not 2 <= len(labels) <= MAX_CATEGORIES:
                raise ReviewError(f"{where}.labels", f"A categorical score lists 2 to {MAX_CATEGORIES} labels.")
            if not all(isinstance(label, str) and 0 < len(label.strip()) <= 100 for label in labels):
                raise ReviewError(f"{where}.labels", "Each label is text of 1 to 100 characters.")
            labels = [label.strip() for label in labels]
            if len(set(labels)) != len(labels):
                raise ReviewError(f"{where}.labels", "A categorical score's labels are all different.")
            clean["labels"] = labels
        elif "labels" in score:
            raise ReviewError(f"{where}.labels", f"A {kind} score has no labels: labels belong to categorical scores.")
        scores.append(clean)
    return scores


def clean_instructions(raw) -> str:
    if not isinstance(raw, str) or len(raw) > MAX_INSTRUCTIONS:
        raise ReviewError("instructions", f"A rubric's instructions are text of at most {MAX_INSTRUCTIONS:,} characters.")
    return raw


def clean_values(scores: list[dict], raw) -> dict:
    """A label's values, checked against the rubric: every score but free text answered, each within its range or labels."""
    if not isinstance(raw, dict):
        raise ReviewError("values", "A label's values are an object: {score name: value}.")
    by_name = {score["name"]: score for score in scores}
    unknown = set(raw) - set(by_name)
    if unknown:
        first = sorted(unknown)[0]
        raise ReviewError(f"values.{first[:50]}", f"The rubric has no score {first[:50]!r}; its scores are {', '.join(by_name)}.")
    values = {}
    for name, score in by_name.items():
        field = f"values.{name}"
        value = raw.get(name)
        if value is None or value == "":
            if score["kind"] == "text":
                continue
            raise ReviewError(field, f"{name} is not answered.")
        kind = score["kind"]
        if kind == "numeric":
            if isinstance(value, str):
                try:
                    value = float(value)
                except ValueError:
                    raise ReviewError(field, f"{name} is a number from {score['min']:g} to {score['max']:g}.") from None
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not score["min"] <= value <= score["max"]:
                raise ReviewError(field, f"{name} is a number from {score['min']:g} to {score['max']:g}.")
            values[name] = float(value)
        elif kind == "boolean":
            if isinstance(value, str) and value in ("true", "false", "yes", "no"):
                value = value in ("true", "yes")
            if not isinstance(value, bool):
                raise ReviewError(field, f"{name} is true or false.")
            values[name] = value
        elif kind == "categorical":
            if value not in score["labels"]:
                raise ReviewError(field, f"{name} is one of {', '.join(score['labels'])}.")
            values[name] = value
        else:
            if not isinstance(value, str) or len(value) > MAX_TEXT:
                raise ReviewError(field, f"{name} is text of at most {MAX_TEXT:,} characters.")
            values[name] = value
    return values


def as_number(score: dict, value) -> float | None:
    """A label's value as a number agreement can be computed on: a category's index, a boolean's 0/1; None for text,
    and for a value the score (as the current rubric has it) cannot read: one made under a version where it differed."""
    kind = score["kind"]
    if kind == "categorical":
        return float(score["labels"].index(value)) if isinstance(value, str) and value in score["labels"] else None
    if kind == "boolean":
        return float(value) if isinstance(value, bool) else None
    if kind == "numeric" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def level(score: dict) -> str:
    """Krippendorff's level of measurement for the score: interval for numbers, nominal for the rest."""
    return "interval" if score["kind"] == "numeric" else "nominal"


def keyed(score: dict) -> list:
    """The values keys 1-9 give on the review page, in order (none for free text or a range wider than nine steps)."""
    if score["kind"] == "boolean":
        return [True, False]
    if score["kind"] == "categorical":
        return score["labels"][:KEYED]
    if score["kind"] == "numeric" and float(score["min"]).is_integer() and float(score["max"]).is_integer() and score["max"] - score["min"] < KEYED:
        return list(range(int(score["min"]), int(score["max"]) + 1))
    return []
