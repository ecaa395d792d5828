"""The reference agent end to end: cloned from the platform's own driver repo, run in a real
sandbox against a scripted OpenAI-compatible model on this machine, traced, segmented."""

import importlib
import json

import pytest
from django.apps import apps

from belvedir.sandbox.models import SandboxHost
from harnesses.actions import start_run
from harnesses.execution import execute_run
from harnesses.forms import preset_initial
from harnesses.models import Harness, HarnessEnvVar, Preset
from traces.models import Span, Task, TraceSession
from traces.segmentation import process_quiet_sessions

from .conftest import OUTSIDE_ADDRESS
from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import fund, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]

TASKS = """\
Write hi into hello.txt :: test "$(cat hello.txt)" = hi
Put the answer to everything into answer.txt :: grep -qx 42 answer.txt
Count to infinity
"""
STEP_CAP = 3


def tool_call(n, command):
    return {"id": f"call_{n}", "type": "function", "function": {"name": "shell", "arguments": json.dumps({"command": command})}}


def scripted(body):
    """The model: what it says depends on the task and on how many tool results it has seen."""
    task = next(m["content"] for m in body["messages"] if m["role"] == "user")
    seen = sum(m["role"] == "tool" for m in body["messages"])
    if task.startswith("Write hi"):
        if seen == 0:
            return {"role": "assistant", "content": None, "tool_calls": [tool_call(1, "echo hi > hello.txt")]}
        return {"role": "assistant", "content": "Wrote it.\nRESULT: success"}
    if task.startswith("Put the answer"):
        if seen == 0:
            return {"role": "assistant", "content": None, "tool_calls": [tool_call(2, "echo 41 > answer.txt && cat answer.txt")]}
        return {"role": "assistant", "content": "Done, it is 41.\nRESULT: success"}
    return {"role": "assistant", "content": "still counting", "tool_calls": [tool_call(3 + seen, f"echo {seen}")]}


@pytest.fixture
def platform(settings, live_server, egress):
    settings.PRESET_REPO_ORG = ""
    settings.HARNESS_ALLOW_LOCAL_REPOS = False  # the platform's own driver repo needs no exception
    settings.HARNESS_HEARTBEAT_SECONDS = 0.5
    settings.TRACE_QUIET_SECONDS = 0
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL, "capacity": 4})
    importlib.import_module("harnesses.migrations.0006_presets_use_shipped_drivers").seed(apps, None)
    return live_server.url


def test_the_reference_agent_solves_fails_and_caps_tasks(platform, owner, project, owner_client):
    fund(project)
    preset = Preset.objects.get(slug="reference-agent")
    initial = preset_initial(preset)
    with FakeOpenAI(reply=scripted, host=OUTSIDE_ADDRESS) as fake:
        harness = Harness.objects.create(
            project=project,
            created_by=owner,
            preset=preset,
            name=initial["name"],
            repo_url=initial["repo_url"],
            install_command=initial["install_command"],
            run_command=initial["run_command"],
            tasks=TASKS,
            time_limit_seconds=300,
        )
        for name, value in {
            "LLM_BASE_URL": fake.url,
            "LLM_MODEL": "scripted-model",
            "LLM_API_KEY": "sk-fake-key-123",
            "AGENT_MAX_STEPS": str(STEP_CAP),
        }.items():
            HarnessEnvVar.objects.create(harness=harness, name=name, value=value, secret=name == "LLM_API_KEY")
        run = start_run(harness, owner)
        execute_run(run.pk)
        run.refresh_from_db()
        calls = list(fake.requests)
        model_port = int(fake.url.split(":")[2].split("/")[0])

    assert run.status == "succeeded", (run.status_message, run.log_tail)
    # It went out through the egress proxy only: to the model and to the platform (traces).
    platform_host, platform_port = platform.split("//")[1].split(":")
    wanted = {(OUTSIDE_ADDRESS, model_port), (platform_host, int(platform_port))}
    reached = lambda: {(d.host, d.port) for d in run.egress_grant().destinations.filter(reason="")}  # noqa: E731
    wait_for(lambda: wanted <= reached(), timeout=15)
    assert run.commit_sha and run.commit_sha == run.commit_sha.strip()
    assert run.score == pytest.approx(1 / 3) and run.model_label == "scripted-model"
    rows = run.results["tasks"]
    assert [(r["verdict"], r["steps"]) for r in rows] == [("solved", 2), ("failed", 2), ("stopped", STEP_CAP)]
    assert "check failed" in rows[1]["reason"] and "step cap" in rows[2]["reason"]
    assert (run.results["total"], run.results["solved"], run.results["failed"], run.results["stopped"]) == (3, 1, 1, 1)
    # The shell really ran inside the sandbox: the model saw the output of its command.
    answer_turn = next(c["body"] for c in calls if any(m["role"] == "tool" and "41" in m["content"] for m in c["body"]["messages"]))
    assert "exit code 0" in next(m["content"] for m in answer_turn["messages"] if m["role"] == "tool")
    assert all(c["auth"] == "Bearer sk-fake-key-123" for c in calls)
    assert "sk-fake-key-123" not in run.log_tail and "-> stopped after 3 step(s)" in run.log_tail

    # The run page lists each task with its verdict.
    page = owner_client.get(f"/runs/{run.pk}/").content.decode()
    for row in rows:
        assert row["task"] in page
    assert page.count('class="verdict solved"') == 1 and page.count('class="verdict failed"') == 1 and page.count('class="verdict stopped"') == 1

    # Every model call is a span in the run's session, and the quiet session forms tasks and a group.
    session = TraceSession.objects.get(project=project, session_id=str(run.pk))
    llm = Span.objects.filter(project=project, session_id=str(run.pk), span_kind="llm")
    assert llm.count() == len(calls) == 2 + 2 + STEP_CAP
    assert llm.filter(model="scripted-model").count() == len(calls)
    assert process_quiet_sessions() >= 1  # quiet at once: TRACE_QUIET_SECONDS is 0 here
    tasks = list(Task.objects.filter(session=session).order_by("started_at"))
    assert [t.first_user_message for t in tasks] == [r["task"] for r in rows]
    assert [t.span_count for t in tasks] == [2 + 1 + 1, 2 + 1 + 1, 1 + STEP_CAP * 2]  # workflow + model calls + shell calls
    assert {t.group.name for t in tasks} == {"reference-agent"}


def test_it_speaks_the_anthropic_messages_api_too(live_server, api_key, project, tmp_path):
    """Outside a sandbox, against a scripted /v1/messages endpoint: tool_use blocks in, tool_result blocks back."""
    import subprocess
    import sys
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from harnesses import drivers

    seen = []

    class Anthropic(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, self.headers["x-api-key"], self.headers["anthropic-version"], body))
            results = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
            if results:
                content = [{"type": "text", "text": f"Saw {results[0]['content'].splitlines()[0]}.\nRESULT: success"}]
            else:
                content = [
                    {"type": "text", "text": "On it."},
                    {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"command": "echo hi > hello.txt"}},
                ]
            reply = json.dumps(
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": content,
                    "stop_reason": "tool_use" if not results else "end_turn",
                    "usage": {"input_tokens": 11, "output_tokens": 7},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    server = ThreadingHTTPServer((OUTSIDE_ADDRESS, 0), Anthropic)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("Write hi into hello.txt :: grep -qx hi hello.txt\nSay hello\n")
    agent_dir = drivers.SOURCE / "reference-agent"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(drivers.SOURCE / "_shared"),
        "LLM_BASE_URL": f"http://{OUTSIDE_ADDRESS}:{server.server_address[1]}",
        "LLM_API": "anthropic",
        "LLM_MODEL": "claude-test",
        "LLM_API_KEY": "sk-ant-1",
        "FRACTAL_TASKS_FILE": str(tasks),
        "FRACTAL_BASE_URL": live_server.url,
        "FRACTAL_API_KEY": api_key,
        "FRACTAL_RUN_ID": "anthropic-run",
    }
    done = subprocess.run([sys.executable, str(agent_dir / "agent.py")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    server.shutdown()
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["score"] == 1.0 and [(t["verdict"], t["steps"]) for t in results["tasks"]] == [("solved", 2), ("solved", 2)]
    assert results["tasks"][1]["reason"] == "the model reported success"
    path, key, version, second = seen[1]
    assert (path, key, version) == ("/v1/messages", "sk-ant-1", "2023-06-01")
    assert second["system"].startswith("You are an agent") and second["tools"][0]["input_schema"]["required"] == ["command"]
    assert second["messages"][-1]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "exit code 0\n"}
    llm = Span.objects.filter(project=project, session_id="anthropic-run", span_kind="llm")
    assert llm.count() == 4 and set(llm.values_list("input_tokens", flat=True)) == {11}
