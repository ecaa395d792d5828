"""lm-evaluation-harness: on GPU against vLLM serving MODEL (+ ADAPTER_URL), or on CPU against an
OpenAI-compatible endpoint; converted to results.json."""

import argparse
import json
import os

from belvedir_driver import SERVED_NAME, Tracer, VLLMServer, finish, limit, newest, require_env, run_traced
from convert_lmeval import convert


def lm_eval(backend, model_args, tasks, chat):
    def command(relay_url):
        args = ",".join(f"{k}={v}" for k, v in {**model_args, "base_url": relay_url + ("/chat/completions" if chat else "/completions")}.items())
        line = [".venv/bin/lm_eval", "--model", backend, "--model_args", args, "--tasks", tasks, "--output_path", "out"]
        if chat:
            line.append("--apply_chat_template")
        if limit():
            line += ["--limit", str(limit())]
        return line

    return command


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", default="hellaswag,arc_easy")
    args = parser.parse_args()
    tasks = os.environ.get("LM_EVAL_TASKS") or args.tasks
    tracer = Tracer(service="lm-eval")
    if os.environ.get("MODEL"):
        # GPU path: vLLM in the sandbox; loglikelihood tasks through the completions API.
        model = os.environ["MODEL"]
        label = os.environ.get("MODEL_LABEL") or model
        with VLLMServer(model, os.environ.get("ADAPTER_URL", "")) as server:
            model_args = {"model": SERVED_NAME, "tokenizer": model, "num_concurrent": 8, "max_retries": 3, "tokenized_requests": False}
            code = run_traced(tracer, lm_eval("local-completions", model_args, tasks, chat=False), model, upstream=server.url)
    else:
        # CPU path: any OpenAI-compatible deployment; chat completions, so generative tasks only.
        require_env("LLM_BASE_URL", "LLM_MODEL")
        label = os.environ.get("MODEL_LABEL") or os.environ["LLM_MODEL"]
        tasks = os.environ.get("LM_EVAL_TASKS") or "gsm8k"
        model_args = {"model": os.environ["LLM_MODEL"], "num_concurrent": 4, "max_retries": 3}
        code = run_traced(tracer, lm_eval("local-chat-completions", model_args, tasks, chat=True), os.environ["LLM_MODEL"])
    finish(tracer, convert(json.loads(newest("**/results_*.json", "out").read_text()), label), code)


if __name__ == "__main__":
    main()
