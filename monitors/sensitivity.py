"""A monitor's sensitivity in the user's terms, turned into the test's.

The user says the smallest drop worth an alert (`min_drop`) and how many false
alarms a month the team will accept. Each scheduled run is one paired test
against the baseline (Holm across the suite's benchmarks), so the per-run
false-alarm rate is simply `alpha = false alarms a month / runs a month`:
a nightly monitor that accepts one false alarm in three months tests each run
at 0.01. From the deployment's measured noise (the spread of the paired
per-row differences in its last comparison) follow the rows that catch a drop
of `min_drop` with 80 % power at that alpha, and the smallest drop the rows it
has can catch. bench/monitors.py checks both rates by simulation.
"""

import math

from evals import statistics

from . import schedule

# Before a monitor has measured its deployment: the spread of a right/wrong difference between two
# independent runs at 50 % accuracy, the largest there is (pairing only lowers it).
WORST_CASE_SD = statistics.proportion_sd(0.5)
MAX_ALPHA = statistics.ALPHA  # never looser than an ordinary comparison


def alpha(cron: str, false_alarms_per_month: float) -> float:
    return min(MAX_ALPHA, false_alarms_per_month / schedule.runs_per_month(cron))


def paired_spread(row: dict) -> float | None:
    """The spread of the per-row differences a comparison measured (None before any rows paired).

    Right/wrong rows: from the flips, sqrt(flip rate - delta^2), the flip rate
    taken at least 3/n (the rule of three's 95 % bound when none flipped): a
    deployment that answered every row as before is measured, not assumed as
    noisy as a coin. Graded rows: recovered from the comparison's detectable
    difference at the usual alpha.
    """
    n = row.get("n") or 0
    if n <= 0:
        return None
    if row.get("test") == "mcnemar":
        flips = row["flips"]["right_to_wrong"] + row["flips"]["wrong_to_right"]
        rate = max(flips / n, 3 / n)
        return math.sqrt(max(rate - (row.get("delta") or 0) ** 2, 3 / n))
    if not row.get("mde"):
        return None
    return row["mde"] * math.sqrt(n) / (statistics.z(1 - statistics.ALPHA / 2) + statistics.z(statistics.POWER))


def detectable(n: int, sd: float, at_alpha: float) -> float | None:
    """The smallest drop n paired rows catch with 80 % power at this alpha."""
    return statistics.mde(n, sd, at_alpha)


def rows_needed(min_drop: float, sd: float, at_alpha: float) -> int | None:
    return statistics.n_needed(min_drop, sd, at_alpha)
