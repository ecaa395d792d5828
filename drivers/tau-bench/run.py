"""Run tau-bench (sierra-research/tau-bench) and write results.json."""

import argparse
import json
import os

from belvedir_driver import Tracer, finish, limit, newest, require_env, run_traced
from convert_tau import convert


def provider_and_name(model):
    provider, _, name = model.partition("/")
    return (provider, name) if name else ("openai", model)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="retail", choices=["retail", "airline"])
    parser.add_argument("--strategy", default="tool-calling")
    args = parser.parse_args()
    require_env("LLM_MODEL")
    model = os.environ["LLM_MODEL"]
    provider, name = provider_and_name(model)
    user_provider, user_name = provider_and_name(os.environ.get("TAU_USER_MODEL", model))
    tracer = Tracer(service="tau-bench")
    command = [
        ".venv/bin/python",
        "upstream/run.py",
        "--env",
        args.env,
        "--agent-strategy",
        args.strategy,
        "--model",
        name,
        "--model-provider",
        provider,
        "--user-model",
        user_name,
        "--user-model-provider",
        user_provider,
        "--user-strategy",
        "llm",
        "--max-concurrency",
        os.environ.get("TAU_CONCURRENCY", "1"),
        "--start-index",
        "0",
        "--end-index",
        str(limit(-1)),
        "--log-dir",
        "out",
    ]
    code = run_traced(tracer, command, model)
    results = convert(json.loads(newest("*.json", "out").read_text()), model)
    results["env"] = args.env
    finish(tracer, results, code)


if __name__ == "__main__":
    main()
