"""A scheduled run's verdict against its baseline: passed, regressed, improved, inconclusive or failed.

The suite comparison (evals/suites/comparison.py) pairs each benchmark's rows
and adjusts its p-values with Holm across benchmarks; here they are read at
the monitor's own alpha (sensitivity.py), not the usual 0.05. A run whose
rows found no change is *passed* only when those rows could have caught a
drop of `min_drop`; otherwise *inconclusive*, saying how many rows would.
"""

from dataclasses import dataclass, field

from evals import statistics
from evals.suites.comparison import points

from . import sensitivity

PASSED, REGRESSED, IMPROVED, INCONCLUSIVE, FAILED = "passed", "regressed", "improved", "inconclusive", "failed"


@dataclass
class Decision:
    verdict: str
    reason: str
    benchmarks: list[dict] = field(default_factory=list)


def benchmark_entry(row: dict, at_alpha: float, min_drop: float) -> dict:
    """One benchmark of the comparison as the monitor keeps it: its delta with interval, p after Holm, and what its rows can detect."""
    n = row["n"]
    sd = sensitivity.paired_spread(row) or sensitivity.WORST_CASE_SD
    p = row.get("p_adjusted")
    delta = row["delta"]
    decisive = delta is not None and p is not None and p < at_alpha
    return {
        "benchmark": row["benchmark"],
        "n": n,
        "delta": delta,
        "delta_ci": row.get("delta_ci"),
        "p_adjusted": p,
        "verdict": statistics.verdict(decisive, delta or 0),
        "sd": sd,
        "detectable_drop": sensitivity.detectable(n, sd, at_alpha),
        "rows_needed": sensitivity.rows_needed(min_drop, sd, at_alpha),
        "failed": row.get("failed", False),
    }


def decide(compared: list[dict], at_alpha: float, min_drop: float) -> Decision:
    """`compared`: the suite comparison's benchmark rows (each with `failed` set when either side's eval failed)."""
    entries = [benchmark_entry(row, at_alpha, min_drop) for row in compared]
    if not entries:
        return Decision(FAILED, "No benchmark was scored on both this run and its baseline.", entries)
    if failed := [e["benchmark"] for e in entries if e["failed"]]:
        return Decision(FAILED, f"{', '.join(failed)} failed (errors past the limit, or its worker died): its scores are not the benchmark's.", entries)
    worse = [e for e in entries if e["verdict"] == statistics.WORSE]
    better = [e for e in entries if e["verdict"] == statistics.BETTER]
    if worse:
        return Decision(REGRESSED, "Worse on " + "; ".join(_moved(e) for e in worse) + ".", entries)
    if better:
        return Decision(IMPROVED, "Better on " + "; ".join(_moved(e) for e in better) + ".", entries)
    blind = [e for e in entries if e["detectable_drop"] is None or e["detectable_drop"] > min_drop]
    if blind:
        parts = [
            f"{e['benchmark']}'s {e['n']:,} rows catch only a drop of {_size(e['benchmark'], e['detectable_drop'])}; "
            f"about {e['rows_needed']:,} would catch {_size(e['benchmark'], min_drop)}"
            for e in blind
            if e["detectable_drop"] is not None and e["rows_needed"] is not None
        ]
        return Decision(INCONCLUSIVE, "No change found, but too few rows to rule one out: " + ("; ".join(parts) or "no rows paired") + ".", entries)
    return Decision(PASSED, f"No drop of {_size(entries[0]['benchmark'], min_drop)} or more on any benchmark.", entries)


def _size(benchmark: str, value: float) -> str:
    return points(benchmark, value).lstrip("+")


def _moved(entry: dict) -> str:
    low, high = entry["delta_ci"] or (None, None)
    interval = f" [{points(entry['benchmark'], low)}, {points(entry['benchmark'], high)}]" if low is not None else ""
    return f"{entry['benchmark']} {points(entry['benchmark'], entry['delta'])}{interval}, p = {entry['p_adjusted']:.2g} after Holm"
