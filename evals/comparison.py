"""A paired comparison of two evals that scored the same rows.

Pairing is what makes a small eval decide: each row is its own control, so
only the rows that flipped carry information (McNemar). Rows are paired only
when both evals drew exactly the same rows of the same source; anything else
is refused with the reason, never silently matched by index.
"""

from dataclasses import dataclass

from . import benchmarks, statistics
from .categories import axes_of, group_by_category
from .models import DatasetVersion, Eval
from .noise import noise
from .scoring.calibration import NOT_CALIBRATED, calibration_status
from .subset import select_rows

FIELDS = ("row_index", "input", "output", "reference", "score", "error", "category", "completions")


class NotPaired(Exception):
    """The two evals did not score the same rows; the message says how they differ."""

    status_code = 409


@dataclass
class Side:
    ev: Eval
    values: list[float]

    def as_dict(self) -> dict:
        interval = statistics.score_interval(self.values)
        return {
            "id": self.ev.pk,
            "deployment": self.ev.deployment.name,
            "score": statistics.mean(self.values) if self.values else None,
            "score_ci": interval.as_list() if interval else None,
            "n": len(self.values),
        }


def row_count(ev: Eval) -> int:
    if ev.benchmark:
        return benchmarks.get(ev.benchmark).row_count()
    return DatasetVersion.objects.get(dataset_id=ev.dataset_id, number=ev.dataset_version).row_count


def _options(ev: Eval) -> dict:
    # Resolved against today's options: an eval stored before an option existed (gsm8k's {} before lm_eval_prompt) ran with its default.
    spec = benchmarks.get(ev.benchmark)
    return spec.resolve_options(ev.benchmark_options) if spec is not None else ev.benchmark_options


def check_same_rows(a: Eval, b: Eval):
    if (a.benchmark, a.dataset_id) != (b.benchmark, b.dataset_id):
        raise NotPaired(f"Eval #{a.pk} scored {a.label} and eval #{b.pk} scored {b.label}: there are no shared rows to pair.")
    if a.dataset_id and a.dataset_version != b.dataset_version:
        raise NotPaired(
            f"Eval #{a.pk} scored version {a.dataset_version} of dataset {a.label} and eval #{b.pk} version {b.dataset_version}: "
            "its rows changed between the two, and rows that differ are never paired. Run one again on the other's rows to compare them."
        )
    if a.benchmark_version and b.benchmark_version and a.benchmark_version != b.benchmark_version:
        raise NotPaired(f"Eval #{a.pk} and eval #{b.pk} scored different versions of {a.label}'s data; their rows are not the same.")
    if a.benchmark and _options(a) != _options(b):
        raise NotPaired(f"Eval #{a.pk} and eval #{b.pk} scored {a.label} with different options; their scores do not measure the same thing.")
    if a.dataset_id and a.scorers != b.scorers:
        raise NotPaired(f"Eval #{a.pk} and eval #{b.pk} scored {a.label} with different scorers; their scores do not measure the same thing.")
    if a.source_key() == b.source_key():
        return
    count = row_count(a)
    if select_rows(count, a.sample_limit, a.seed) != select_rows(count, b.sample_limit, b.seed):
        raise NotPaired(
            f"Eval #{a.pk} and eval #{b.pk} drew different rows of {a.label} (different sample limit or seed), "
            "and rows that differ are never paired. Run one again on the other's rows to compare them."
        )


def compare_evals(a: Eval, b: Eval, *, set_aside_flaky: bool = False) -> dict:
    """B against A on their shared rows: both scores, the paired delta (B - A), McNemar, flips and a verdict.

    With epochs, the delta is set against the noise floor (the larger of the
    two evals'), and `set_aside_flaky` leaves out the rows that flipped within
    either deployment's own epochs, listing them.
    """
    check_same_rows(a, b)
    rows_a = {s["row_index"]: s for s in a.samples.values(*FIELDS)}
    rows_b = {s["row_index"]: s for s in b.samples.values(*FIELDS)}
    for index in rows_a.keys() & rows_b.keys():
        if rows_a[index]["input"] != rows_b[index]["input"]:
            raise NotPaired(f"Row {index} holds different inputs in eval #{a.pk} and eval #{b.pk}; rows that differ are never paired.")
    # Only rows both evals scored: an error or an unfinished row on either side drops the pair.
    shared = sorted(
        i
        for i in rows_a.keys() & rows_b.keys()
        if not rows_a[i]["error"] and not rows_b[i]["error"] and rows_a[i]["score"] is not None and rows_b[i]["score"] is not None
    )
    flaky = [i for i in shared if _flipped(rows_a[i]) or _flipped(rows_b[i])]
    if set_aside_flaky:
        shared = [i for i in shared if i not in set(flaky)]
    va, vb = [rows_a[i]["score"] for i in shared], [rows_b[i]["score"] for i in shared]
    result = {"a": Side(a, va).as_dict(), "b": Side(b, vb).as_dict(), "n": len(shared), "unpaired": len(rows_a.keys() | rows_b.keys()) - len(shared)}
    result.update(paired_statistics(va, vb))
    result["set_aside"] = {"applied": set_aside_flaky, "count": len(flaky) if set_aside_flaky else 0, "flaky_rows": flaky}
    result["noise"] = noise_floor_of(a, b, result["delta"])
    result["judge"] = judge_note(a, b)
    result["by_category"] = delta_by_category(axes_of(a), ((rows_a[i]["category"], (rows_a[i]["score"], rows_b[i]["score"])) for i in shared))
    result["flipped"] = [
        {
            "row_index": i,
            "input": rows_a[i]["input"],
            "reference": rows_a[i]["reference"],
            "output_a": rows_a[i]["output"],
            "output_b": rows_b[i]["output"],
            "score_a": rows_a[i]["score"],
            "score_b": rows_b[i]["score"],
            "direction": "right_to_wrong" if rows_b[i]["score"] < rows_a[i]["score"] else "wrong_to_right",
        }
        for i in shared
        if rows_a[i]["score"] != rows_b[i]["score"]
    ]
    return result


def _flipped(row: dict) -> bool:
    """Right in one of its epochs and wrong in another (a pass rate strictly between 0 and 1)."""
    return len(row["completions"] or []) > 1 and 0 < row["score"] < 1


def noise_floor_of(a: Eval, b: Eval, delta: float | None) -> dict | None:
    """The larger noise floor of the two evals (epochs), and whether the delta is beyond it; None without epochs."""
    floors = [(ev.pk, found) for ev in (a, b) if (found := noise(ev)) is not None]
    if not floors:
        return None
    eval_id, widest = max(floors, key=lambda pair: pair[1]["noise_floor"])
    return {
        "eval": eval_id,
        "noise_floor": widest["noise_floor"],
        "noise_floor_ci": widest["noise_floor_ci"],
        "flip_rate": widest["flip_rate"],
        "above": delta is not None and abs(delta) > widest["noise_floor"],
    }


def judge_note(a: Eval, b: Eval) -> dict | None:
    """A judged comparison rests on its judges: are they calibrated (enough human labels)?"""
    judges = {ev.judge_id for ev in (a, b) if ev.judge_id}
    if not judges:
        return None
    cards = [calibration_status(ev) for ev in (a, b) if ev.judge_id]
    calibrated = all(card["calibrated"] for card in cards)
    return {"calibrated": calibrated, "judges": cards, "warning": "" if calibrated else NOT_CALIBRATED}


def delta_by_category(axes, pairs) -> dict[str, list[dict]]:
    """The paired delta B - A within each category: {axis: [{"name", "n", "a", "b", "delta", "delta_ci", "mcnemar_p", "verdict"}]}."""
    breakdown = {}
    for axis, by_value in group_by_category(pairs, axes).items():
        breakdown[axis] = []
        for name, scores in by_value.items():
            a, b = [x for x, _ in scores], [y for _, y in scores]
            paired = paired_statistics(a, b)
            breakdown[axis].append(
                {"name": name, "n": len(scores), "a": statistics.mean(a), "b": statistics.mean(b)}
                | {key: paired[key] for key in ("delta", "delta_ci", "method", "mcnemar_p", "p_value", "verdict")}
            )
    return breakdown


def paired_statistics(a: list[float], b: list[float]) -> dict:
    n = len(a)
    if n == 0:
        return {
            "delta": None,
            "delta_ci": None,
            "method": None,
            "mcnemar_p": None,
            "p_value": None,
            "test": None,
            "flips": {"right_to_wrong": 0, "wrong_to_right": 0},
            "verdict": statistics.NOT_DECISIVE,
            "mde": None,
            "rows_needed": None,
        }
    differences = [y - x for x, y in zip(a, b, strict=True)]
    delta = statistics.mean(differences)
    worse, better = sum(d < 0 for d in differences), sum(d > 0 for d in differences)
    if statistics.is_binary(a) and statistics.is_binary(b):
        right_both = sum(1 for x, y in zip(a, b, strict=True) if x == y == 1)
        interval = statistics.newcombe_paired(right_both, better, worse, n - right_both - better - worse)
        p_value = statistics.mcnemar_exact(better, worse)
        decisive, method, test_p = p_value < statistics.ALPHA, "newcombe", p_value
    else:
        interval, p_value, method = statistics.paired_bootstrap(a, b), None, "paired bootstrap"
        decisive = interval.excludes_zero()
        # A p-value for graded rows too, so a suite can correct its verdicts for multiplicity.
        test_p = statistics.paired_t_p(differences)
    sd = statistics.variance(differences) ** 0.5 if n > 1 else 0.0
    if sd == 0:
        # No flips yet: fall back on the unpaired spread at the pooled score, the conservative figure.
        sd = statistics.proportion_sd(min(max((sum(a) + sum(b)) / (2 * n), 0.0), 1.0))
    verdict = statistics.verdict(decisive, delta)
    return {
        "delta": delta,
        "delta_ci": interval.as_list(),
        "method": method,
        "mcnemar_p": p_value,
        "p_value": test_p,
        "test": "mcnemar" if p_value is not None else "paired t",
        "flips": {"right_to_wrong": worse, "wrong_to_right": better},
        "verdict": verdict,
        "mde": statistics.mde(n, sd),
        "rows_needed": statistics.n_needed(delta, sd) if verdict == statistics.NOT_DECISIVE else None,
    }
