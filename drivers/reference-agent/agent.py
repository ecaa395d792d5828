"""The reference agent: a model, a shell, a loop. Standard library only.

For each line of the Tasks field (`task` or `task :: check command`) the agent
works in its own directory: it asks the model what to do, runs the `shell`
commands the model calls, feeds their output back, and stops when the model
answers without a tool call, or at the step cap, or at the time cap. The check
command's exit code is the verdict; without a check, the model's final line
`RESULT: success` (or `RESULT: failure`) is. Score = fraction solved.

Every model call is traced under the run's session; each task is a workflow
span holding its model calls and shell commands.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from belvedir_driver import Tracer, read_tasks, require_env, run_check, write_results

SYSTEM = """You are an agent working in a Linux shell, in the current directory.
Use the `shell` tool to run commands; you will see their output.
When the task is done (or cannot be done), answer without calling a tool,
and end your answer with one line: `RESULT: success` or `RESULT: failure`."""
SHELL_TOOL = {
    "name": "shell",
    "description": "Run a bash command in the task's directory; returns its exit code and output.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
}
OUTPUT_LIMIT = 8000
WORKFLOW = "reference-agent"


class ModelError(Exception):
    pass


def sampling():
    """LLM_MAX_TOKENS and LLM_TEMPERATURE when set: a small local model left unbounded can repeat itself to its context's end."""
    options = {}
    if os.environ.get("LLM_MAX_TOKENS", "").isdigit():
        options["max_tokens"] = int(os.environ["LLM_MAX_TOKENS"])
    try:
        options["temperature"] = float(os.environ["LLM_TEMPERATURE"])
    except (KeyError, ValueError):
        pass
    return options


def _post(url, headers, body, timeout):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **headers}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise ModelError(f"HTTP {exc.code}: {exc.read()[:300].decode('utf-8', 'replace')}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ModelError(str(exc)) from None


class OpenAIChat:
    """/chat/completions with function tools (OpenAI, vLLM, most gateways)."""

    system = "openai"

    def __init__(self, base_url, model, key):
        self.url, self.model = f"{base_url.rstrip('/')}/chat/completions", model
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def start(self, task):
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]

    def ask(self, messages, timeout):
        body = {"model": self.model, "messages": messages, "tools": [{"type": "function", "function": SHELL_TOOL}], **sampling()}
        data = _post(self.url, self.headers, body, timeout)
        message = data["choices"][0]["message"]
        calls = []
        for call in message.get("tool_calls") or []:
            try:
                command = json.loads(call["function"]["arguments"] or "{}").get("command", "")
            except ValueError:
                command = ""
            calls.append((call["id"], command))
        usage = data.get("usage") or {}
        turn = {"role": "assistant", "content": message.get("content"), **({"tool_calls": message["tool_calls"]} if calls else {})}
        return turn, message.get("content") or "", calls, {"prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens")}

    def results(self, outputs):
        return [{"role": "tool", "tool_call_id": call_id, "content": output} for call_id, output in outputs]


class AnthropicMessages:
    """/v1/messages with tool_use blocks (Anthropic and compatible gateways)."""

    system = "anthropic"

    def __init__(self, base_url, model, key):
        self.url, self.model = f"{base_url.rstrip('/')}/v1/messages", model
        self.headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}

    def start(self, task):
        return [{"role": "user", "content": task}]

    def ask(self, messages, timeout):
        tool = {"name": SHELL_TOOL["name"], "description": SHELL_TOOL["description"], "input_schema": SHELL_TOOL["parameters"]}
        body = {"model": self.model, "max_tokens": 4096, "system": SYSTEM, "messages": messages, "tools": [tool], **sampling()}
        data = _post(self.url, self.headers, body, timeout)
        blocks = data.get("content") or []
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        calls = [(b["id"], (b.get("input") or {}).get("command", "")) for b in blocks if b.get("type") == "tool_use"]
        usage = data.get("usage") or {}
        return {"role": "assistant", "content": blocks}, text, calls, {"input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens")}

    def results(self, outputs):
        return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": o} for i, o in outputs]}]


def shell(command, cwd, timeout):
    try:
        done = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=timeout)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired:
        output, code = f"(timed out after {timeout} s)", 124
    if len(output) > OUTPUT_LIMIT:
        output = "…" + output[-OUTPUT_LIMIT:]
    return f"exit code {code}\n{output}"


def solve(client, tracer, task, workdir, max_steps, task_seconds, shell_seconds, record=None):
    """One task's loop. Returns (final answer, steps taken, why it stopped or None); `record` (a list) gets each
    step: the model's text, its token counts and the commands it ran with their output's start."""
    messages = client.start(task)
    deadline = time.monotonic() + task_seconds
    for step in range(1, max_steps + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            return "", step - 1, f"time cap ({task_seconds} s)"
        start = time.time_ns()
        try:
            turn, text, calls, usage = client.ask(messages, timeout=left)
        except ModelError as exc:
            tracer.llm_call(model=client.model, prompt=messages, completion=[], start_ns=start, end_ns=time.time_ns(), system=client.system, error=exc)
            return "", step, f"model error: {exc}"
        tracer.llm_call(model=client.model, prompt=messages, completion=[turn], start_ns=start, end_ns=time.time_ns(), usage=usage, system=client.system)
        messages.append(turn)
        entry = {"step": step, "text": text, "usage": usage, "commands": []}
        if record is not None:
            record.append(entry)
        if not calls:
            return text, step, None
        outputs = []
        for call_id, command in calls:
            with tracer.span("shell", kind="tool", **{"tool.command": command}) as out:
                output = shell(command, workdir, min(shell_seconds, max(1, deadline - time.monotonic())))
                out["tool.output"] = output
            print(f"    $ {command}\n      {output.splitlines()[0]}", flush=True)
            entry["commands"].append({"command": command, "output": output[:2000]})
            outputs.append((call_id, output))
        messages.extend(client.results(outputs))
    return "", max_steps, f"step cap ({max_steps} steps)"


def verdict_of(answer, check, workdir, stopped):
    if stopped:
        return "stopped", stopped
    if check:
        passed, output = run_check(check, cwd=workdir)
        return ("solved", "check passed") if passed else ("failed", f"check failed: {output.strip()[-300:]}")
    last = answer.strip().splitlines()[-1].strip().lower() if answer.strip() else ""
    return ("solved", "the model reported success") if last == "result: success" else ("failed", "the model did not report success")


def solve_instruction(client, path, trajectory_path, max_steps, task_seconds, shell_seconds):
    """One Harbor task: its instruction.md, worked on in the current folder (the task's); no verdict of its own,
    the task's verifier decides. The steps go to `trajectory_path` as JSON for the platform to read, and, with the
    trial's trace key in the environment, to Traces as spans under the trial's session."""
    steps = []
    tracer = Tracer(service="reference-agent")
    instruction = Path(path).read_text()
    with tracer.workflow("task", WORKFLOW, **{"task.text": instruction}) as span:
        answer, taken, stopped = solve(client, tracer, instruction, Path.cwd(), max_steps, task_seconds, shell_seconds, steps)
        span.update({"task.steps": taken, **({"task.stopped": stopped} if stopped else {})})
    Path(trajectory_path).parent.mkdir(parents=True, exist_ok=True)
    Path(trajectory_path).write_text(json.dumps({"agent": "reference", "model": client.model, "steps": steps, "answer": answer, "stopped": stopped}))
    # A tracing outage is said, not fatal: the trajectory file is the trial's record.
    delivered = tracer.flush()
    print(
        f"done after {taken} step(s){': ' + stopped if stopped else ''}; {tracer.sent} spans sent{'' if delivered else ' (some could not be delivered)'}",
        flush=True,
    )


def main():
    require_env("LLM_BASE_URL", "LLM_MODEL")
    base, model, key = os.environ["LLM_BASE_URL"], os.environ["LLM_MODEL"], os.environ.get("LLM_API_KEY", "")
    api = os.environ.get("LLM_API") or ("anthropic" if "anthropic" in base else "openai")
    client = (AnthropicMessages if api == "anthropic" else OpenAIChat)(base, model, key)
    max_steps = int(os.environ.get("AGENT_MAX_STEPS", "20"))
    task_seconds = int(os.environ.get("AGENT_TASK_SECONDS", "600"))
    shell_seconds = int(os.environ.get("AGENT_SHELL_SECONDS", "120"))
    if os.environ.get("AGENT_INSTRUCTION_FILE"):
        # Run as an agent of a Harbor-format task (a Belvedir job's trial).
        return solve_instruction(client, os.environ["AGENT_INSTRUCTION_FILE"], os.environ["AGENT_TRAJECTORY_FILE"], max_steps, task_seconds, shell_seconds)
    tasks = read_tasks()
    if not tasks:
        sys.exit("[belvedir] no tasks: fill the harness's Tasks field, one task per line")

    tracer = Tracer(service="reference-agent")
    root = Path(os.environ.get("AGENT_WORK_DIR", Path.home() / "tasks"))
    rows = []
    for number, (task, check) in enumerate(tasks, 1):
        workdir = root / str(number)
        workdir.mkdir(parents=True, exist_ok=True)
        print(f"[{number}/{len(tasks)}] {task}", flush=True)
        started = time.monotonic()
        with tracer.workflow(f"task {number}", WORKFLOW, **{"task.text": task}) as span:
            answer, steps, stopped = solve(client, tracer, task, workdir, max_steps, task_seconds, shell_seconds)
            verdict, reason = verdict_of(answer, check, workdir, stopped)
            span.update({"task.verdict": verdict, "task.steps": steps})
        rows.append({"task": task, "check": check, "verdict": verdict, "steps": steps, "seconds": round(time.monotonic() - started, 2), "reason": reason})
        print(f"    -> {verdict} after {steps} step(s): {reason}", flush=True)
        tracer.flush()

    solved = sum(r["verdict"] == "solved" for r in rows)
    write_results(
        {
            "score": solved / len(rows),
            "model": model,
            "total": len(rows),
            "solved": solved,
            "failed": sum(r["verdict"] == "failed" for r in rows),
            "stopped": sum(r["verdict"] == "stopped" for r in rows),
            "tasks": rows,
        }
    )
    flushed = tracer.flush()
    print(f"score {solved}/{len(rows)}; {tracer.sent} spans sent", flush=True)
    if all(r["reason"].startswith("model error") for r in rows):
        sys.exit("[belvedir] every task ended in a model error: check LLM_BASE_URL, LLM_MODEL and LLM_API_KEY")
    if not flushed:
        sys.exit("[belvedir] traces could not be delivered")


if __name__ == "__main__":
    main()
