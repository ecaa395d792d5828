"""GAIA through Inspect (inspect_evals/gaia), converted to results.json."""

import json
import os

from belvedir_driver import Tracer, finish, limit, newest, require_env, run_traced
from convert_gaia import convert


def main():
    require_env("LLM_MODEL", "HF_TOKEN")
    model = os.environ["LLM_MODEL"]
    tracer = Tracer(service="gaia")
    command = [
        ".venv/bin/inspect",
        "eval",
        "inspect_evals/gaia",
        "--model",
        model,
        "-T",
        f"subset={os.environ.get('GAIA_SUBSET', '2023_all')}",
        "-T",
        "split=validation",
        "--log-dir",
        "logs",
        "--log-format",
        "json",
        "--max-connections",
        os.environ.get("GAIA_CONCURRENCY", "4"),
    ]
    if limit():
        command += ["--limit", str(limit())]
    code = run_traced(tracer, command, model)
    log = json.loads(newest("*.json", "logs").read_text())
    results = convert(log)
    if log.get("status") != "success":
        code = code or 1
    finish(tracer, results, code)


if __name__ == "__main__":
    main()
