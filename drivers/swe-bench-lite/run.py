"""SWE-bench Lite: mini-swe-agent writes the patches, SWE-bench's evaluation (sb-cli) judges them."""

import json
import os
import subprocess
import sys
from pathlib import Path

from belvedir_driver import Tracer, finish, limit, newest, require_env, run_traced
from convert_swebench import convert


def main():
    require_env("LLM_MODEL", "SWEBENCH_API_KEY")
    model = os.environ["LLM_MODEL"]
    run_id = f"belvedir-{os.environ.get('FRACTAL_RUN_ID', 'local')}"
    tracer = Tracer(service="swe-bench-lite")
    agent = [
        ".venv/bin/mini-extra",
        "swebench",
        "--subset",
        "lite",
        "--split",
        "test",
        "--slice",
        f"0:{limit(300)}",
        "--model",
        model,
        "--workers",
        os.environ.get("SWEBENCH_WORKERS", "1"),
        "--output",
        "out",
    ]
    if os.environ.get("SWEBENCH_ENVIRONMENT"):
        agent += ["--environment-class", os.environ["SWEBENCH_ENVIRONMENT"]]
    code = run_traced(tracer, agent, model, env={"MSWEA_CONFIGURED": "true"})
    predictions = json.loads(Path("out/preds.json").read_text()) if Path("out/preds.json").exists() else {}
    if not predictions:
        tracer.flush()
        sys.exit(f"[belvedir] mini-swe-agent wrote no predictions (exit code {code})")
    evaluate = [
        ".venv/bin/sb-cli",
        "submit",
        "swe-bench_lite",
        "test",
        "--predictions_path",
        "out/preds.json",
        "--run_id",
        run_id,
        "--output_dir",
        "sb-cli-reports",
    ]
    print("[belvedir] $ " + " ".join(evaluate), flush=True)
    graded = subprocess.run(evaluate).returncode
    report = json.loads(newest(f"*{run_id}*.json", "sb-cli-reports").read_text())
    finish(tracer, convert(report, predictions, model), code or graded)


if __name__ == "__main__":
    main()
