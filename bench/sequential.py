"""The sequential comparison (evals/sequential.py) simulated on MMLU-sized paired data: where it stops, and how often it is wrong.

Each replay is one comparison of two deployments on 14,042 right/wrong rows in
the run order: A right with probability 0.60, B with 0.65 (a 5-point
difference) or 0.60 (none), the two correlated on a row (phi = 0.6: the same
questions are hard for both, as for real pairs of models: 19% of the rows are
discordant, 12 B-better to 7 A-better with the difference). The test looks after every row,
the most often anyone can (the engine looks about once a second), at alpha = 0.05
and the default minimum difference of 2 points. Printed, per case:
- the median stop as a share of the rows (and the quartiles);
- how often its verdict matches the full run's: McNemar's exact test on all
  14,042 rows at the same alpha, the fixed-n answer a stopped comparison saves;
- with no difference, how often it decides (a false decision), and why the rest stopped.
`--priors` also prints the median stop for several Beta priors of the mixture (evals/sequential.py's PRIOR).

Usage: .venv/bin/python bench/sequential.py [--replays 1000] [--priors]   (~1 min here; no database)
"""

import argparse
import math
import statistics as stats
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evals import sequential, statistics  # noqa: E402

ROWS, ALPHA, BASE, PHI = 14_042, 0.05, 0.60, 0.6


def replays(count: int, p_a: float, p_b: float, seed: int):
    """Each replay's differences B - A (1, 0 or -1 a row), drawn with numpy: the test itself is the module's, a row at a time."""
    both = p_a * p_b + PHI * math.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
    only_b, only_a = p_b - both, p_a - both
    rng = np.random.default_rng(seed)
    for _ in range(count):
        u = rng.random(ROWS)
        yield np.where(u < only_b, 1.0, np.where(u < only_b + only_a, -1.0, 0.0)).tolist()


def full_run_verdict(differences) -> str:
    better, worse = differences.count(1.0), differences.count(-1.0)
    return statistics.verdict(statistics.mcnemar_exact(better, worse) < ALPHA, better - worse)


def case(name: str, p_b: float, count: int, seed: int, prior: float = sequential.PRIOR) -> dict:
    started = time.perf_counter()
    stops, verdicts, agree, reasons = [], Counter(), 0, Counter()
    for differences in replays(count, BASE, p_b, seed):
        at, found = sequential.first_stop(differences, ROWS, ALPHA, binary=True, prior=prior)
        stops.append(at / ROWS)
        verdicts[found.verdict] += 1
        reasons[found.why or found.reason or "ran to the end"] += 1
        agree += found.verdict == full_run_verdict(differences)
    quartiles = stats.quantiles(stops, n=4)
    return {
        "name": name,
        "median": stats.median(stops),
        "quartiles": (quartiles[0], quartiles[2]),
        "agree": agree / count,
        "decided": (verdicts[statistics.BETTER] + verdicts[statistics.WORSE]) / count,
        "verdicts": dict(verdicts),
        "reasons": dict(reasons),
        "seconds": time.perf_counter() - started,
    }


def show(result: dict, count: int):
    low, high = result["quartiles"]
    print(
        f"{result['name']}: median stop {result['median']:.1%} of the rows (quartiles {low:.1%}–{high:.1%}); "
        f"verdict as the full run's in {result['agree']:.1%}; decided in {result['decided']:.1%}; "
        f"verdicts {result['verdicts']}; stopped by {result['reasons']} ({count} replays, {result['seconds']:.1f} s)"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replays", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--priors", action="store_true", help="also the median stop under Beta(a, a) priors of 0.5 to 16 (200 replays each)")
    args = parser.parse_args()
    print(
        f"{ROWS:,} rows, A at {BASE:.2f}, phi {PHI}, alpha {ALPHA}, minimum difference {sequential.MIN_DIFFERENCE * 100:g} points, prior Beta({sequential.PRIOR:g}, {sequential.PRIOR:g})"
    )
    better = case("5 points (0.60 → 0.65)", BASE + 0.05, args.replays, args.seed)
    show(better, args.replays)
    none = case("no difference (0.60 = 0.60)", BASE, args.replays, args.seed + 1)
    show(none, args.replays)
    print(f"false decisions with no difference: {none['decided']:.1%} (alpha {ALPHA:.0%})")
    ok = better["median"] <= 0.25 and better["agree"] >= 0.95 and none["decided"] <= ALPHA
    print(f"targets (median stop ≤ 25%, agreement ≥ 95%, false decisions ≤ alpha): {'met' if ok else 'NOT met'}")
    if args.priors:
        for prior in (0.5, 1.0, 2.0, 4.0, 8.0, 16.0):
            found = case(f"prior {prior:g}, 5 points", BASE + 0.05, 200, args.seed, prior=prior)
            print(f"prior Beta({prior:g}, {prior:g}): median stop {found['median']:.1%} (quartiles {found['quartiles'][0]:.1%}–{found['quartiles'][1]:.1%})")


if __name__ == "__main__":
    main()
