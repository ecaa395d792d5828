"""MT-Bench with FastChat's llm_judge: answers from vLLM (GPU) or any OpenAI-compatible endpoint
(CPU), graded by an LLM judge; converted to results.json."""

import argparse
import os
from pathlib import Path

from belvedir_driver import SERVED_NAME, Tracer, VLLMServer, finish, limit, require_env, run_traced
from convert_mtbench import convert, read_jsonl

JUDGE_DIR = Path("upstream/fastchat/llm_judge")


def answer(tracer, answered, upstream, model):
    command = lambda relay: [  # noqa: E731
        "../../../.venv/bin/python",
        "gen_api_answer.py",
        "--bench-name",
        "mt_bench",
        "--model",
        answered,
        "--openai-api-base",
        relay,
        "--parallel",
        "4",
        "--question-end",
        str(limit(80)),
    ]
    return run_traced(tracer, command, model, upstream=upstream, cwd=JUDGE_DIR)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--judge", default="gpt-4o")
    args = parser.parse_args()
    require_env("OPENAI_API_KEY")  # the judge's key
    judge_key = os.environ["OPENAI_API_KEY"]
    tracer = Tracer(service="mt-bench")
    if os.environ.get("MODEL"):
        label = os.environ.get("MODEL_LABEL") or os.environ["MODEL"]
        with VLLMServer(os.environ["MODEL"], os.environ.get("ADAPTER_URL", "")) as server:
            code = answer(tracer, SERVED_NAME, server.url, os.environ["MODEL"])
        answered = SERVED_NAME
    else:
        require_env("LLM_BASE_URL", "LLM_MODEL")
        answered = os.environ["LLM_MODEL"]
        label = os.environ.get("MODEL_LABEL") or answered
        code = answer(tracer, answered, os.environ["LLM_BASE_URL"], answered)
    # The judge: OpenAI (or a compatible endpoint) with its own key, through the relay so its calls are traced too.
    judge = [
        "../../../.venv/bin/python",
        "gen_judgment.py",
        "--bench-name",
        "mt_bench",
        "--judge-model",
        args.judge,
        "--mode",
        "single",
        "--model-list",
        answered,
        "--parallel",
        "2",
        "--first-n",
        str(limit(80) * 2),
    ]
    judged = run_traced(
        tracer,
        judge,
        args.judge,
        upstream=os.environ.get("MT_BENCH_JUDGE_BASE_URL", "https://api.openai.com/v1"),
        cwd=JUDGE_DIR,
        env={"LLM_API_KEY": judge_key, "OPENAI_API_KEY": judge_key},
        stdin="\n",  # it asks to press Enter
    )
    judgments = read_jsonl((JUDGE_DIR / "data/mt_bench/model_judgment" / f"{args.judge}_single.jsonl").read_text())
    finish(tracer, convert(judgments, answered, label), code or judged)


if __name__ == "__main__":
    main()
