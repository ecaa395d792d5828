"""The platform's local model, with the LoRA adapter at ADAPTER_URL, served side by side in the sandbox (CPU);
each scored on the multiple-choice questions of the harness's Tasks by log-likelihood, as lm-eval scores MMLU."""

import json
import os
import subprocess
import sys
import time
import urllib.request

from belvedir_driver import SERVED_NAME, Tracer, TracingRelay, _no_proxy_opener, fetch_adapter, finish, limit, require_env

BASE = "base"
LETTERS = "ABCDEFGHIJ"
PORT = 8000
READY_SECONDS = 120


def read_questions(path):
    """One JSON object a line: {"question": str, "choices": [str, ...], "answer": "B" or 1}; blank and # lines skipped."""
    questions = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                row = json.loads(line)
                question, choices, answer = row["question"], row["choices"], row["answer"]
                if not isinstance(question, str) or not isinstance(choices, list) or not 2 <= len(choices) <= len(LETTERS):
                    raise ValueError("a question and 2 to 10 choices")
                index = LETTERS.index(answer) if isinstance(answer, str) else int(answer)
                if not 0 <= index < len(choices):
                    raise ValueError(f"answer {answer!r} is not one of the choices")
            except (ValueError, KeyError, TypeError) as exc:
                sys.exit(f"[belvedir] Tasks line {number} is not a question: {exc} (see README.md for the format)")
            questions.append((question, [str(c) for c in choices], index))
    n = limit()
    return questions[:n] if n else questions


def prompt(question, choices):
    # lm-eval's MMLU prompt (mmlu_default): the question, lettered choices, "Answer:"; the continuations are " A", " B"…
    return question.strip() + "\n" + "".join(f"{LETTERS[i]}. {choice}\n" for i, choice in enumerate(choices)) + "Answer:"


def loglikelihood(url, model, context, continuation):
    """log P(continuation | context): the echoed prompt's token logprobs from where the continuation starts."""
    body = {"model": model, "prompt": context + continuation, "max_tokens": 0, "echo": True, "logprobs": 0, "temperature": 0}
    request = urllib.request.Request(f"{url}/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with _no_proxy_opener().open(request, timeout=300) as response:
        logprobs = json.loads(response.read())["choices"][0]["logprobs"]
    return sum(lp for lp, at in zip(logprobs["token_logprobs"], logprobs["text_offset"], strict=True) if at >= len(context) and lp is not None)


def choose(url, model, question, choices):
    context = prompt(question, choices)
    scores = [loglikelihood(url, model, context, f" {LETTERS[i]}") for i in range(len(choices))]
    return max(range(len(choices)), key=scores.__getitem__)


class LocalServer:
    """`python3 -m localmodel` (mounted by the platform) serving the base model as `base` and the adapter as `candidate`."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.url = f"http://127.0.0.1:{PORT}/v1"

    def __enter__(self):
        command = ["python3", "-m", "localmodel", os.environ["BELVEDIR_LOCAL_MODEL"], "--model-id", BASE, "--port", str(PORT)]
        if self.adapter:
            command += ["--adapter", self.adapter, "--adapter-id", SERVED_NAME]
        print("[belvedir] $ " + " ".join(command), flush=True)
        self.process = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": os.environ["BELVEDIR_LOCAL_PYTHONPATH"]})
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                sys.exit(f"[belvedir] the model server exited with code {self.process.returncode} before serving (its error is above)")
            try:
                with _no_proxy_opener().open(f"{self.url}/models", timeout=5):
                    return self
            except OSError:
                time.sleep(0.5)
        self.process.kill()
        sys.exit(f"[belvedir] the model server did not answer within {READY_SECONDS} s")

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(30)


def main():
    if not os.environ.get("BELVEDIR_LOCAL_MODEL"):
        sys.exit("[belvedir] this harness needs the local model: tick 'Local model' on the harness (the preset does)")
    require_env("FRACTAL_TASKS_FILE")
    questions = read_questions(os.environ["FRACTAL_TASKS_FILE"])
    if not questions:
        sys.exit("[belvedir] the Tasks hold no question")
    adapter = None
    if os.environ.get("ADAPTER_URL"):
        ggufs = [name for name in fetch_adapter(os.environ["ADAPTER_URL"]) if name.endswith(".gguf")]
        if len(ggufs) != 1:
            sys.exit(f"[belvedir] the adapter zip must hold one .gguf file, not {len(ggufs)}")
        adapter = os.path.join("adapter", ggufs[0])
    label = os.environ.get("MODEL_LABEL") or os.environ.get("BELVEDIR_LOCAL_MODEL_ID") or BASE
    tracer = Tracer(service="local-model")
    models = [BASE, SERVED_NAME] if adapter else [BASE]
    with LocalServer(adapter) as server, TracingRelay(tracer, server.url) as relay:
        picks = {model: [choose(relay.url, model, q, c) for q, c, _ in questions] for model in models}
    correct = {model: sum(pick == answer for pick, (_, _, answer) in zip(picks[model], questions, strict=True)) for model in models}
    scored = SERVED_NAME if adapter else BASE
    tasks = []
    for index, (question, _, answer) in enumerate(questions):
        chose = {model: LETTERS[picks[model][index]] for model in models}
        reason = f"answer {LETTERS[answer]}; " + ", ".join(f"{'adapter' if m == SERVED_NAME else m} chose {chose[m]}" for m in models)
        tasks.append({"task": question[:500], "verdict": "solved" if picks[scored][index] == answer else "failed", "reason": reason})
    results = {"score": correct[scored] / len(questions), "model": label, "total": len(questions), "solved": correct[scored], "tasks": tasks}
    if adapter:
        results["base_score"] = correct[BASE] / len(questions)
    finish(tracer, results)


if __name__ == "__main__":
    main()
