"""Aider Polyglot: aider's own benchmark script on the polyglot exercises, converted to results.json."""

import json
import os
from pathlib import Path

from belvedir_driver import Tracer, finish, limit, require_env, run_traced
from convert_aider import convert

RUN_NAME = "belvedir"


def main():
    require_env("LLM_MODEL")
    model = os.environ["LLM_MODEL"]
    tracer = Tracer(service="aider-polyglot")
    command = [
        "../../.venv/bin/python",
        "benchmark/benchmark.py",
        RUN_NAME,
        "--new",
        "--model",
        model,
        "--edit-format",
        os.environ.get("AIDER_EDIT_FORMAT", "diff"),
        "--threads",
        os.environ.get("AIDER_THREADS", "1"),
        "--exercises-dir",
        "polyglot-benchmark",
        "--num-tests",
        str(limit(-1)),
    ]
    if os.environ.get("AIDER_LANGUAGES"):
        command += ["--languages", os.environ["AIDER_LANGUAGES"]]
    # benchmark.py refuses to run outside a container unless told it is in one: the sandbox is one.
    code = run_traced(
        tracer, command, model, cwd="upstream/aider", env={"AIDER_DOCKER": "1", "AIDER_BENCHMARK_DIR": str(Path("upstream/aider/tmp.benchmarks").resolve())}
    )
    runs = sorted(Path("upstream/aider/tmp.benchmarks").glob(f"*--{RUN_NAME}"))
    exercises = [json.loads(p.read_text()) for p in runs[-1].glob("*/exercises/practice/*/.aider.results.json")] if runs else []
    if not exercises:
        tracer.flush()
        raise SystemExit(f"[belvedir] aider's benchmark wrote no results (exit code {code})")
    finish(tracer, convert(exercises), code)


if __name__ == "__main__":
    main()
