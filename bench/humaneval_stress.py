"""Stress: the 164 HumanEval canonical solutions, 20 rounds in a row, each round fresh CodeSandboxes laid out as each eval gets them.

An honest sample must never fail and no infrastructure hiccup may count: the
figure to report is failures and errors out of 3,280 executions (target 0 and
0), with the time per round.

Usage: .venv/bin/python bench/humaneval_stress.py [--rounds 20] [--slots 4]
"""

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--slots", type=int, default=4)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "belvedir.settings")
    import django

    django.setup()
    from django.conf import settings
    from standalone_sandboxes import standalone_code_sandboxes

    from belvedir.sandbox.backends.docker import DockerBackend
    from belvedir.sandbox.errors import SandboxPlatformError
    from evals.benchmarks import humaneval

    rows = humaneval.rows()
    failures, errors, durations = [], [], []

    def score(sandbox, row):
        try:
            passed, detail = sandbox.run(humaneval.program(row, row["reference"]))
        except SandboxPlatformError as exc:
            errors.append((row["task_id"], exc.message))
            return
        if not passed:
            failures.append((row["task_id"], detail))

    for number in range(1, args.rounds + 1):
        started = time.perf_counter()
        with standalone_code_sandboxes(
            f"stress-{number}", DockerBackend(settings.SANDBOX_DOCKER_URL), slots=args.slots, timeout=settings.HUMANEVAL_TIMEOUT_SECONDS
        ) as scorer:
            with ThreadPoolExecutor(args.slots) as pool:
                list(pool.map(lambda row: score(scorer, row), rows))
        durations.append(time.perf_counter() - started)
        print(f"round {number:2d}: {durations[-1]:5.2f} s  failures so far {len(failures)}  errors so far {len(errors)}", flush=True)

    total = args.rounds * len(rows)
    print(f"machine: {os.cpu_count()} CPUs; {args.slots} slots; {args.rounds} rounds of {len(rows)} canonical solutions = {total} executions")
    print(f"failures {len(failures)}  errors {len(errors)}  (target 0 and 0)")
    print(
        f"per round: min {min(durations):.2f} s  median {sorted(durations)[len(durations) // 2]:.2f} s  max {max(durations):.2f} s  total {sum(durations):.1f} s"
    )
    for task_id, detail in (failures + errors)[:20]:
        print(f"  {task_id}: {detail}")
    sys.exit(1 if failures or errors else 0)


if __name__ == "__main__":
    main()
