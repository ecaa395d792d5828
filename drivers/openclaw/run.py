"""OpenClaw: one non-interactive `openclaw agent` run per line of the Tasks field, checked, scored."""

import json
import os
import subprocess
import sys
from pathlib import Path

from belvedir_driver import Tracer, TracingRelay, finish, model_env, read_tasks, require_env, run_check, upstream_url
from convert_openclaw import convert, parse_stream, task_row

OPENCLAW = str(Path("node_modules/.bin/openclaw").resolve())
NODE_BIN = str(Path(".venv/bin").resolve())


def configure(relay_url, model, home):
    """OpenClaw's config: one provider (the tracing relay in front of LLM_BASE_URL) and its model."""
    name = model.split("/", 1)[1] if model.startswith(("openai/", "anthropic/")) else model
    api = "anthropic-messages" if model.startswith(("anthropic/", "claude")) else "openai-completions"
    config = {
        "agents": {"defaults": {"model": {"primary": f"belvedir/{name}"}, "workspace": str(home / "workspace")}},
        "models": {
            "mode": "merge",
            "providers": {
                "belvedir": {
                    "baseUrl": relay_url,
                    "apiKey": os.environ.get("LLM_API_KEY", ""),
                    "api": api,
                    "models": [{"id": name, "name": name}],
                }
            },
        },
    }
    (home / ".openclaw").mkdir(parents=True, exist_ok=True)
    (home / ".openclaw" / "openclaw.json").write_text(json.dumps(config, indent=2))


def main():
    require_env("LLM_MODEL")
    model = os.environ["LLM_MODEL"]
    tasks = read_tasks()
    if not tasks:
        sys.exit("[belvedir] no tasks: fill the harness's Tasks field, one task per line")
    seconds = int(os.environ.get("OPENCLAW_TASK_SECONDS", "600"))
    tracer = Tracer(service="openclaw")
    rows, parsed_runs, failures = [], [], 0
    Path("out").mkdir(exist_ok=True)
    with TracingRelay(tracer, upstream_url(model)) as relay:
        home = Path("workspaces").resolve()
        configure(relay.url, model, home)
        env = {**model_env(relay.url, model), "HOME": str(home), "PATH": f"{NODE_BIN}:{os.environ.get('PATH', '')}"}
        for number, (task, check) in enumerate(tasks, 1):
            workdir = home / "workspace"
            workdir.mkdir(parents=True, exist_ok=True)
            print(f"[{number}/{len(tasks)}] {task}", flush=True)
            command = [
                OPENCLAW,
                "agent",
                "--local",
                "--session-id",
                f"belvedir-{os.environ.get('FRACTAL_RUN_ID', 'local')}-{number}",
                "--message",
                task,
                "--json",
                "--timeout",
                str(seconds),
            ]
            with tracer.workflow(f"task {number}", "openclaw", **{"task.text": task}) as span:
                try:
                    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=seconds + 60)
                    stdout, code = done.stdout, done.returncode
                    sys.stderr.write(done.stderr[-4000:])
                except subprocess.TimeoutExpired as exc:
                    stdout, code = (exc.stdout or b"").decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or ""), 124
                (Path("out") / f"task-{number}.ndjson").write_text(stdout)
                parsed = parse_stream(stdout)
                passed, output = run_check(check, cwd=workdir) if check else (None, "")
                row = task_row(task, check, parsed, code, passed, output)
                span.update({"task.verdict": row["verdict"], "task.steps": row["steps"]})
            failures += code not in (0, 124)
            rows.append(row)
            parsed_runs.append(parsed)
            print(f"    -> {row['verdict']}: {row['reason']}", flush=True)
    results = convert(rows, model, parsed_runs)
    finish(tracer, results, 1 if failures == len(rows) else 0)


if __name__ == "__main__":
    main()
