"""A paired comparison of two evals that scored the same rows.

Pairing is what makes a small eval decide: each row is its own control, so
only the rows that flipped carry information (McNemar). Rows are paired only
when both evals drew exactly the same rows of the same source; anything else
is refused with the reason, never silently matched by index.
"""

from dataclasses import dataclass
from functools import lru_cache

from . import benchmarks, sequential, serving, statistics
from .categories import axes_of, group_by_category
from .models import DatasetVersion, Eval
from .noise import noise
from .scoring.calibration import NOT_CALIBRATED, calibration_status
from .subset import run_order, select_rows

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
            # A failed side (its rows errored past the limit) fails a gate whatever the verdict: its rows are not the benchmark's.
            "status": self.ev.status,
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
    """NotPaired unless A and B draw the same rows; B may be an eval not yet created (one that is to decide against A)."""
    if (a.benchmark, a.dataset_id) != (b.benchmark, b.dataset_id):
        raise NotPaired(f"Eval #{a.pk} scored {a.label} and {_named(b)} scored {b.label}: there are no shared rows to pair.")
    if a.dataset_id and a.dataset_version != b.dataset_version:
        raise NotPaired(
            f"Eval #{a.pk} scored version {a.dataset_version} of dataset {a.label} and {_named(b)} version {b.dataset_version}: "
            "its rows changed between the two, and rows that differ are never paired. Run one again on the other's rows to compare them."
        )
    if a.benchmark_version and b.benchmark_version and a.benchmark_version != b.benchmark_version:
        raise NotPaired(f"Eval #{a.pk} and {_named(b)} scored different versions of {a.label}'s data; their rows are not the same.")
    if a.benchmark and _options(a) != _options(b):
        raise NotPaired(f"Eval #{a.pk} and {_named(b)} scored {a.label} with different options; their scores do not measure the same thing.")
    if a.dataset_id and a.scorers != b.scorers:
        raise NotPaired(f"Eval #{a.pk} and {_named(b)} scored {a.label} with different scorers; their scores do not measure the same thing.")
    if a.source_key() == b.source_key():
        return
    count = row_count(a)
    if select_rows(count, a.sample_limit, a.seed) != select_rows(count, b.sample_limit, b.seed):
        raise NotPaired(
            f"Eval #{a.pk} and {_named(b)} drew different rows of {a.label} (different sample limit or seed), "
            "and rows that differ are never paired. Run one again on the other's rows to compare them."
        )


def _named(ev: Eval) -> str:
    return f"eval #{ev.pk}" if ev.pk else "the new eval"


def compare_evals(a: Eval, b: Eval, *, set_aside_flaky: bool = False, sequential_alpha: float | None = None) -> dict:
    """B against A on their shared rows: both scores, the paired delta (B - A), McNemar, flips and a verdict.

    With epochs, the delta is set against the noise floor (the larger of the
    two evals'), and `set_aside_flaky` leaves out the rows that flipped within
    either deployment's own epochs, listing them. A "sequential" section (None
    otherwise) when either eval stopped early or `sequential_alpha` asks for it:
    the always-valid test on the prefix of the run order both stored.
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
    result["serving"] = serving.note(a.serving_stack, b.serving_stack)
    if stopped_early(a) or stopped_early(b) or sequential_alpha is not None:
        scores_a, scores_b = (_usable_scores(rows) for rows in (rows_a, rows_b))
        result["sequential"] = sequential_section(a, b, scores_a, scores_b, sequential_alpha or decision_alpha(a, b))
    else:
        result["sequential"] = None
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


# -- sequential: the comparison on the prefix of the run order both evals stored (evals/sequential.py) ----------------


def stopped_early(ev: Eval) -> bool:
    """The eval stopped before its last row (decided, futile or precise enough), and was not resumed since."""
    return "reason" in ev.early_stop


def decision_alpha(a: Eval, b: Eval) -> float:
    """The α of the evals' own decision target (B's against A, or A's against B), else the house's."""
    for ev, other in ((b, a), (a, b)):
        if ev.decide_against_id == other.pk and ev.decision_alpha is not None:
            return ev.decision_alpha
    return statistics.ALPHA


def eval_order(ev: Eval) -> list[int]:
    """The eval's rows in the order it sends them (subset.run_order)."""
    return _order(row_count(ev), ev.sample_limit, ev.seed)


@lru_cache(maxsize=64)
def _order(count: int, sample_limit: int | None, seed: int) -> list[int]:
    # Looked up at every flush of an eval that may stop early: 15 ms to hash MMLU's 14,042 indices each time.
    return run_order(select_rows(count, sample_limit, seed))


def scale_of(ev: Eval) -> tuple[float, float]:
    found = benchmarks.get(ev.benchmark) if ev.benchmark else None
    return found.scale if found is not None else (0.0, 1.0)


def _usable_scores(rows: dict) -> dict[int, float | None]:
    return {i: (row["score"] if not row["error"] else None) for i, row in rows.items()}


@dataclass(frozen=True)
class Prefix:
    """B against A on the longest prefix of the run order both stored, in score units."""

    at: int  # rows of the order it covers
    of: int  # the eval's rows
    look: sequential.Look
    width: float  # the scale's: differences are tested on [-1, 1]

    @property
    def delta(self) -> float | None:
        return self.look.delta * self.width if self.look.delta is not None else None

    @property
    def interval(self) -> list[float]:
        return [round(self.look.interval[0] * self.width, 6), round(self.look.interval[1] * self.width, 6)]

    @property
    def min_difference(self) -> float:
        return sequential.MIN_DIFFERENCE * self.width


def sequential_prefix(a: Eval, b: Eval, scores_a: dict, scores_b: dict, alpha: float) -> Prefix:
    """The sequential test of B against A (scores: {row index: score, or None for an errored row})."""
    order = eval_order(b)
    covered, pairs = sequential.prefix(order, scores_a, scores_b)
    low, high = scale_of(a)
    width = (high - low) or 1.0
    binary = statistics.is_binary(score for pair in pairs for score in pair)
    found = sequential.look([(y - x) / width for x, y in pairs], len(order) - covered, alpha, binary=binary)
    return Prefix(at=covered, of=len(order), look=found, width=width)


def sequential_section(a: Eval, b: Eval, scores_a: dict, scores_b: dict, alpha: float) -> dict:
    found = sequential_prefix(a, b, scores_a, scores_b, alpha)
    return {
        "alpha": alpha,
        "at": found.at,
        "of": found.of,
        "pairs": found.look.pairs,
        "delta": found.delta,
        "interval": found.interval,
        "p": found.look.p,
        "fixed_n_p": found.look.fixed_p,
        "verdict": found.look.verdict,
        "reason": found.look.reason,
        "why": found.look.why,
        "min_difference": found.min_difference,
        "method": found.look.method,
        "stopped": stopped_early(a) or stopped_early(b),
        "early_stop": {"a": a.early_stop or None, "b": b.early_stop or None},
        "summary": summary(found, alpha, "B", "A", scale_of(a), stopped=stopped_early(a) or stopped_early(b)),
    }


def summary(found: Prefix, alpha: float, b: str, a: str, scale: tuple[float, float], *, stopped: bool) -> str:
    """One line: "stopped at 812/14,042: B better (p ≤ 0.05)", with the always-valid p as it is."""
    look = found.look
    where = f"{'stopped at' if stopped and look.reason else 'at'} {found.at:,}/{found.of:,}"
    p = f"always-valid p = {look.p:.2g}"
    if look.reason == sequential.DECISION:
        return f"{where}: {b} {look.verdict} than {a} (p ≤ {alpha:g}; {p}; fixed-n p of the prefix {look.fixed_p:.2g})"
    if look.why == sequential.WITHIN:
        low, high = found.interval
        return (
            f"{where}: no difference of {_difference(found.min_difference, scale)} or more between {b} and {a} "
            f"(always-valid {1 - alpha:.0%} interval {_difference(low, scale, signed=True)} to {_difference(high, scale, signed=True)}; {p})"
        )
    if look.why == sequential.UNDECIDABLE:
        return f"{where}: the remaining rows could not decide between {b} and {a} at α = {alpha:g} ({p})"
    return f"{where}: not decided yet at α = {alpha:g} ({p})"


def _difference(value: float, scale: tuple[float, float], *, signed: bool = False) -> str:
    if scale == (0.0, 1.0):
        return f"{value * 100:{'+' if signed else ''}.1f} points"
    return f"{value:{'+' if signed else ''}.2f} on its {scale[0]:g}–{scale[1]:g} scale"
