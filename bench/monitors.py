"""Monitors: how often an unchanged sampled deployment raises a false alarm, how soon a 3-point drop is caught, both
beside fixed-threshold monitors on the same data; and the scheduler's tick with 10,000 schedules.

1. A nightly monitor that accepts 0.3 false alarms a month (each run tested at 0.01) and wants 3-point drops caught.
   The deployment answers by sampling (monitors/simulation.py: each row its own chance of a right answer,
   about a quarter of rows flipping between two runs). Its measured spread sizes the rows (sensitivity.py).
   --runs scheduled runs of it unchanged, for each of --seeds seeds: false alarms per 100 runs; then a
   3-point drop from the first run on: runs until the monitor says regressed. Beside it, monitors that alert
   whenever a run scores 1, 2 or 3 points below the baseline's score, on the same runs.
2. A live monitor: an evaluator passing 80 % of --per-day scores a day, 0.3 false alarms a month accepted. The
   CUSUM's threshold (monitors/cusum.py), then plain simulation: false alarms a month, and days until a 3-point
   drop fires it; beside a fixed threshold on each day's pass rate (exact binomial chances).
3. 10,000 monitors in PostgreSQL: the tick's claim when none is due, and when all are (batches of 500,
   their runs created and next times moved, no suite started): database time and queries.

Targets (issue #58): false alarms <= 1 per 100 runs; a tick with 10,000 schedules <= 1 s of database time, one
query per due batch.

Usage: .venv/bin/python bench/monitors.py [--runs 200] [--seeds 10] [--per-day 100]   (~2 min here)
Creates and drops a database `belvedir_bench_monitors` (BENCH_DATABASE_NAME).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from throwaway import throwaway_database  # noqa: E402

NIGHTLY = "0 3 * * *"
FALSE_ALARMS_PER_MONTH = 0.3
MIN_DROP = 0.03
THRESHOLDS = (0.01, 0.02, 0.03)


def first_alert(flags: list[bool]) -> int | None:
    return next((i for i, flag in enumerate(flags, start=1) if flag), None)


def simulate(runs: int, seeds: int):
    """The fixed monitors compare each run's score with the baseline run's; the paired ones run the monitor's own verdicts."""
    import random

    from monitors import sensitivity, simulation, verdicts

    at_alpha = sensitivity.alpha(NIGHTLY, FALSE_ALARMS_PER_MONTH)
    rng = random.Random(0)
    chances = simulation.abilities(20_000, rng)
    measured = sensitivity.paired_spread(simulation.compared(simulation.answers(chances, 0, rng), simulation.answers(chances, 0, rng)))
    rows = sensitivity.rows_needed(MIN_DROP, measured, at_alpha)
    print(f"Nightly, {FALSE_ALARMS_PER_MONTH} false alarms a month: each run tested at {at_alpha:.3g}; measured spread {measured:.3f} a row;")
    print(f"rows that catch a {MIN_DROP * 100:.0f}-point drop with 80 % power: {rows:,}")
    print()
    header = f"{'monitor':<28} {'false alarms / 100 runs':>24} {'runs to catch a 3-point drop (median, worst)':>46}"
    print(header)
    paired = {"Belvedir (paired, derived alpha)": False, "the same, baseline = last passed": True}
    alarms = {**dict.fromkeys(paired, 0), **{f"fixed: {t * 100:.0f} point(s) below baseline": 0 for t in THRESHOLDS}}
    catches = {name: [] for name in alarms}
    for seed in range(seeds):
        for name, rolling in paired.items():
            quiet = simulation.monitor(runs, rows, at_alpha, MIN_DROP, seed=seed, rolling=rolling)
            alarms[name] += quiet.verdicts.count(verdicts.REGRESSED)
            drop = simulation.monitor(20, rows, at_alpha, MIN_DROP, drop=MIN_DROP, drop_from=0, seed=1000 + seed, rolling=rolling)
            catches[name].append(drop.first(verdicts.REGRESSED))
        # The fixed monitors read the same runs' scores against the baseline run's score.
        base_quiet = simulation.monitor(1, rows, at_alpha, MIN_DROP, seed=seed).scores[0]
        base_drop = simulation.monitor(1, rows, at_alpha, MIN_DROP, seed=1000 + seed).scores[0]
        for t in THRESHOLDS:
            name = f"fixed: {t * 100:.0f} point(s) below baseline"
            alarms[name] += sum(simulation.fixed_threshold(quiet.scores, base_quiet, t))
            catches[name].append(first_alert(simulation.fixed_threshold(drop.scores, base_drop, t)))
    drifts = {name: [] for name in paired}
    for seed in range(seeds):
        for name, rolling in paired.items():
            # A slow drift: half a point worse each run, to 3 points.
            drift = simulation.monitor(30, rows, at_alpha, MIN_DROP, drop=MIN_DROP, drop_from=0, drift=0.005, seed=2000 + seed, rolling=rolling)
            drifts[name].append(drift.first(verdicts.REGRESSED))
    for name in alarms:
        caught = [c for c in catches[name] if c is not None]
        missed = len(catches[name]) - len(caught)
        median = f"{statistics.median(caught):.0f}" if caught else "never"
        worst = f"{max(caught)}" if caught else "never"
        rate = alarms[name] / (runs * seeds) * 100
        print(f"{name:<34} {rate:>18.2f} {median:>30}, {worst}{f' ({missed} of {seeds} never in 20 runs)' if missed else ''}")
    print(f"({runs * seeds:,} unchanged runs over {seeds} seeds; the drop over {seeds} seeds)")
    print()
    print("A drift of half a point a run, to 3 points (30 runs): runs until regressed")
    for name, found in drifts.items():
        caught = [c for c in found if c is not None]
        median = f"{statistics.median(caught):.0f}" if caught else "never"
        print(f"{name:<34} median {median}, caught in {len(caught)} of {seeds} deployments within 30 runs")


def live(per_day: int, seeds: int):
    """A live pass rate at 80 %, `per_day` scores a day, 0.3 false alarms a month accepted: the CUSUM's threshold, its
    false alarms a month and days to catch a 3-point drop by plain simulation, beside a daily fixed threshold."""
    import math

    import numpy as np

    from monitors import cusum

    p0, p1 = 0.8, 0.8 - MIN_DROP
    per_month = per_day * 30
    h = cusum.threshold(p0, p1, per_month / FALSE_ALARMS_PER_MONTH)
    rng = np.random.default_rng(0)
    quiet = cusum.simulate_run_length(h, p0, p1, p0, rng, chains=200 * seeds, limit=per_month * 40)
    dropped = cusum.simulate_run_length(h, p0, p1, p1, rng, chains=200 * seeds)
    print(f"Live: pass rate {p0:.0%}, {per_day:,} scores a day, {FALSE_ALARMS_PER_MONTH} false alarms a month accepted; CUSUM threshold h = {h:.2f}")
    print(f"{'monitor':<40} {'false alarms a month':>22} {'days to catch a 3-point drop (mean)':>38}")
    print(f"{'CUSUM (threshold from the stated rate)':<40} {per_month / quiet.mean():>22.2f} {dropped.mean() / per_day:>38.1f}")

    # A fixed daily threshold: the day's pass rate below a cutoff alerts; exact binomial chances per day. The last
    # row's cutoff is the highest whose false alarms a month stay within the stated rate, the CUSUM's.
    def below(p, cutoff):
        return sum(math.comb(per_day, k) * p**k * (1 - p) ** (per_day - k) for k in range(cutoff))

    matched = max(c for c in range(per_day + 1) if below(p0, c) * 30 <= FALSE_ALARMS_PER_MONTH)
    for cutoff, label in ((math.ceil(p1 * per_day), f"fixed: a day under {p1:.0%}"), (matched, f"fixed: a day under {matched / per_day:.0%} (same rate)")):
        quiet_day, drop_day = below(p0, cutoff), below(p1, cutoff)
        print(f"{label:<40} {quiet_day * 30:>22.2f} {1 / drop_day if drop_day else float('inf'):>38.1f}")
    print(f"({200 * seeds:,} simulated detectors each way; the stated rate's {FALSE_ALARMS_PER_MONTH} is the target)")


def tick_database_time(count: int):
    from django.db import connection
    from django.utils import timezone

    from belvedir.core.actions import create_account
    from evals.models import Deployment
    from monitors import runs
    from monitors.models import Monitor

    owner = create_account(username="bench", password="bench-pw-123", email="bench@example.com")
    project = owner.memberships.get().project
    deployment = Deployment.objects.create(project=project, name="d", base_url="http://127.0.0.1:9/v1", model="m")
    later = timezone.now() + timezone.timedelta(hours=1)
    Monitor.objects.bulk_create(
        [Monitor(project=project, name=f"m{i}", suite_name="quick", deployment=deployment, cron=NIGHTLY, next_run_at=later) for i in range(count)],
        batch_size=2000,
    )
    connection.cursor().execute("ANALYZE monitors_monitor")
    spent = {"seconds": 0.0, "queries": 0}

    def timed(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            spent["seconds"] += time.perf_counter() - started
            spent["queries"] += 1

    def measured(now):
        spent.update(seconds=0.0, queries=0)
        batches, started = 0, time.perf_counter()
        with connection.execute_wrapper(timed):
            while claimed := runs.claim_due(now):
                batches += 1
                if len(claimed) < runs.BATCH:
                    break
        return batches, spent["seconds"], spent["queries"], time.perf_counter() - started

    batches, db, queries, wall = measured(timezone.now())
    print(f"{count:,} monitors, none due: {queries} queries, {db * 1000:.1f} ms of database time ({wall * 1000:.1f} ms in all)")
    batches, db, queries, wall = measured(later)
    print(
        f"{count:,} monitors, all due: {batches} batches of {runs.BATCH}, {queries} queries ({queries / batches:.1f} a batch, with its "
        f"transaction), {db * 1000:.0f} ms of database time ({wall * 1000:.0f} ms in all, the next times computed by croniter)"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--monitors", type=int, default=10_000)
    parser.add_argument("--per-day", type=int, default=100)
    args = parser.parse_args()
    with throwaway_database("belvedir_bench_monitors"):
        simulate(args.runs, args.seeds)
        print()
        live(args.per_day, args.seeds)
        print()
        tick_database_time(args.monitors)


if __name__ == "__main__":
    main()
