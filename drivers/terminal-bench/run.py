"""Terminal-Bench: `tb run` with the Terminus agent, converted to results.json."""

import json
import os
from pathlib import Path

from belvedir_driver import Tracer, finish, limit, require_env, run_traced
from convert_tb import convert

DATASET = "terminal-bench-core==0.1.1"


def main():
    require_env("LLM_MODEL", "DOCKER_HOST")
    model = os.environ["LLM_MODEL"]
    run_id = f"belvedir-{os.environ.get('FRACTAL_RUN_ID', 'local')}"
    tracer = Tracer(service="terminal-bench")
    command = [
        ".venv/bin/tb",
        "run",
        "--dataset",
        os.environ.get("TB_DATASET", DATASET),
        "--agent",
        os.environ.get("TB_AGENT", "terminus"),
        "--model",
        model,
        "--output-path",
        "runs",
        "--run-id",
        run_id,
        "--n-concurrent",
        os.environ.get("TB_CONCURRENCY", "1"),
    ]
    if limit():
        command += ["--n-tasks", str(limit())]
    code = run_traced(tracer, command, model)
    results_file = Path("runs") / run_id / "results.json"
    if not results_file.exists():
        tracer.flush()
        raise SystemExit(f"[belvedir] tb wrote no {results_file} (exit code {code})")
    finish(tracer, convert(json.loads(results_file.read_text()), model), code)


if __name__ == "__main__":
    main()
