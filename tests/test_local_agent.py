"""The demo's agent harness: the reference agent preset, cloned from the platform's driver repo,
run in a real sandbox against the real local model server, reached through the egress proxy."""

import importlib.util

import pytest
import requests
from django.apps import apps

from agent_tasks import jobs
from agent_tasks.actions import import_task_set
from agent_tasks.egress_record import egress_record
from belvedir.localmodel import files
from belvedir.sandbox.models import SandboxHost
from evals.models import Deployment
from harnesses import drivers
from harnesses.actions import start_run
from harnesses.execution import execute_run
from harnesses.local_model import AGENT_ENV, AGENT_TASKS, agent_harness
from traces.models import Span, TraceSession

from .conftest import egress_proxy_process
from .harness_fixtures import fund
from .servers import local_model_server

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def model_url():
    with local_model_server() as url:
        yield url


@pytest.fixture
def proxied(settings, live_server, model_url, tmp_path):
    """A proxy of its own: the local model's origin is one it is started with."""
    settings.PRESET_REPO_ORG = ""
    settings.BELVEDIR_BASE_URL = live_server.url
    settings.LOCAL_MODEL_URL = model_url
    settings.HARNESS_SANDBOX_NETWORK = "egress"
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL})
    importlib.import_module("harnesses.migrations.0006_presets_use_shipped_drivers").seed(apps, None)
    settings.EGRESS_SOCKET_DIR = tmp_path / "egress"
    settings.EGRESS_SOCKET_DIR.mkdir()
    with egress_proxy_process(settings.EGRESS_SOCKET_DIR, live_server.url, BELVEDIR_LOCAL_MODEL_URL=model_url):
        yield model_url


def first_request(task: str, monkeypatch) -> dict:
    """The agent's first model call for a task, as agent.py builds it."""
    monkeypatch.syspath_prepend(str(drivers.SOURCE / "_shared"))
    spec = importlib.util.spec_from_file_location("agent", drivers.SOURCE / "reference-agent" / "agent.py")
    agent = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agent)
    return {
        "model": files.MODEL_ID,
        "messages": [{"role": "system", "content": agent.SYSTEM}, {"role": "user", "content": task}],
        "tools": [{"type": "function", "function": agent.SHELL_TOOL}],
        "max_tokens": int(AGENT_ENV["LLM_MAX_TOKENS"]),
        "temperature": 0.0,
    }


def calls(message: dict) -> list:
    return [(call["function"]["name"], call["function"]["arguments"]) for call in message.get("tool_calls") or []]


def test_the_reference_agent_runs_on_the_local_model_and_its_trajectory_is_the_models_own(proxied, project, owner, monkeypatch):
    fund(project)
    harness = agent_harness(project, owner)
    # What the test asserts is the first turn's: two, where the demo's five took the model a minute on 2 cores.
    assert harness.env_vars.filter(name="AGENT_MAX_STEPS").update(value="2") == 1
    run = start_run(harness, owner)
    execute_run(run.pk)
    run.refresh_from_db()

    assert run.status == "succeeded", (run.status_message, run.log_tail)
    assert run.model_label == files.MODEL_ID and run.results["total"] == 1
    [row] = run.results["tasks"]
    assert row["task"] == AGENT_TASKS.split(" :: ")[0] and row["verdict"] in {"solved", "failed", "stopped"}
    # The model was reached through the proxy, at the local model's origin (on loopback, allowed as the platform is).
    port = int(proxied.split(":")[2].split("/")[0])
    assert ("127.0.0.1", port, "") in {(d.host, d.port, d.reason) for d in run.egress_grant().destinations.all()}
    # Its first answer in the trace is the model's own: the same request asked again, greedy, gives the same text.
    spans = Span.objects.filter(project=project, session_id=str(run.pk), span_kind="llm").order_by("start_unix_nano")
    assert 2 >= spans.count() == row["steps"] >= 1 and spans[0].model == files.MODEL_ID
    again = requests.post(f"{proxied}/chat/completions", json=first_request(row["task"], monkeypatch), timeout=120).json()["choices"][0]["message"]
    traced = spans[0].completion[0]
    assert traced.get("content") == again["content"] and calls(traced) == calls(again)


def test_an_origin_on_loopback_other_than_the_local_models_is_refused(proxied, project, owner, model_url):
    fund(project)
    harness = agent_harness(project, owner)
    other = model_url.replace(model_url.split(":")[2].split("/")[0], "1")  # port 1 on the same loopback address
    harness.env_vars.filter(name="LLM_BASE_URL").update(value=other)
    run = start_run(harness, owner)
    execute_run(run.pk)
    run.refresh_from_db()
    [row] = run.results["tasks"]
    assert row["verdict"] == "stopped" and "HTTP 403: Belvedir egress: 127.0.0.1 resolves to 127.0.0.1, a private" in row["reason"]


def test_the_reference_agent_runs_as_a_jobs_trial_on_the_local_model(proxied, project, owner, monkeypatch, settings):
    """The same agent as a job's trial: its trajectory's turns are the real model's, counted by the model server."""
    settings.EVAL_ALLOW_PRIVATE_URLS = True  # the deployment is the local model, on loopback
    settings.AGENT_MAX_TOKENS = 256  # a 135M model's turn, bounded as the demo's harness bounds it
    settings.AGENT_MAX_STEPS = 2  # what the test asserts needs one turn, and a second to show the cap holds
    # Greedy, as the demo's harness asks: at the server's default of 1 the first turn was a draw, and an empty one
    # (the model ending its turn at once, CI on 2026-12-07) failed the count of its output tokens below.
    settings.AGENT_TEMPERATURE = 0
    fund(project, 1000)
    sent = []
    monkeypatch.setattr(jobs, "async_task", lambda name, trial_id, **kw: sent.append(trial_id))
    task_files = {
        "task.toml": b'version = "1.0"\n[agent]\ntimeout_sec = 90\n[verifier]\ntimeout_sec = 30\n',
        "instruction.md": b"Write the word hi into the file /app/hi.txt.\n",
        "environment/Dockerfile": b"FROM belvedir-sandbox:bookworm\nWORKDIR /app\n",
        "tests/test.sh": b'[ "$(cat /app/hi.txt 2>/dev/null)" = hi ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
    }
    version = import_task_set(project, owner, "hi", task_files, single_name="hi")[0]
    deployment = Deployment.objects.create(project=project, name="local", base_url=proxied, model=files.MODEL_ID)
    job = jobs.create_job(project, owner, version=version, agents=["reference"], deployments=[deployment], budget_cents=100)
    jobs.advance(job.pk)
    while sent:
        jobs.run_job_trial(sent.pop(0))
    trial = job.trials.get()

    assert trial.status == "succeeded" and trial.reward in (0.0, 1.0), (trial.error, trial.agent_output)
    steps = trial.trajectory["steps"]
    assert 1 <= len(steps) <= 2, (trial.trajectory, trial.agent_output)
    assert trial.input_tokens > 0 and trial.output_tokens > 0
    # The first turn's prompt tokens are what the model server counts for the agent's first request: the
    # trajectory is the model's own account, not the agent's guess.
    first = first_request("Write the word hi into the file /app/hi.txt.\n", monkeypatch)
    first.update(max_tokens=1)
    first.pop("temperature")
    counted = requests.post(f"{proxied}/chat/completions", json=first, timeout=120).json()["usage"]["prompt_tokens"]
    assert steps[0]["usage"]["prompt_tokens"] == counted
    # The model was reached through the proxy, its origin the trial's one destination.
    port = int(proxied.split(":")[2].split("/")[0])
    assert ("127.0.0.1", port) in {(d["host"], d["port"]) for d in egress_record(trial)}
    # Its spans are the trial's session in Traces: one model call per turn, the first the same count of tokens.
    calls = Span.objects.filter(project=project, session_id=f"trial-{trial.pk}", span_kind="llm").order_by("start_unix_nano")
    assert calls.count() == len(steps) and calls[0].input_tokens == counted and TraceSession.objects.get(trial=trial).span_count > len(steps)
