"""Jobs in real sandboxes through the queue's own path (claim, charge, run, settle, advance): hostile agents that
fail their own trial and nothing else, and agents that call a model through the egress proxy.

The fast tests of the job's machinery (agents × tasks × attempts, budgets, refunds, pass@k, comparisons and the
export) are in tests/test_agent_job_rules.py; the shipped tasks' oracle and nop run in tests/test_agent_trials.py."""

import base64
import contextlib
import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from agent_tasks import jobs
from agent_tasks.actions import import_task_set
from agent_tasks.agents import AGENTS, Agent
from agent_tasks.egress_record import egress_record
from agent_tasks.models import Job, Trial
from agent_tasks.results import matrix
from belvedir.core.models import ApiKey
from belvedir.sandbox.models import EgressGrant, SandboxHost
from billing.models import LedgerEntry
from evals.models import Deployment
from traces.models import Span, TraceSession

from .conftest import OUTSIDE_ADDRESS
from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import fund, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"


class ShellAgent(Agent):
    def __init__(self, name: str, script: str):
        self.name, self.script = name, script

    def command(self, task):
        return self.script


@pytest.fixture
def local_host(db):
    SandboxHost.objects.update(enabled=False)
    return SandboxHost.objects.create(name="jobs-local", url=settings.SANDBOX_DOCKER_URL, capacity=2)


@pytest.fixture
def examples(project, owner):
    files = {f"tasks/{p.relative_to(EXAMPLES).as_posix()}": p.read_bytes() for p in sorted(EXAMPLES.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    return import_task_set(project, owner, "examples", files)[0]


@pytest.fixture
def worker(monkeypatch):
    """The queue, worked here: what advance sends is run by run_job_trial, as a worker would, in send order."""
    sent = []
    monkeypatch.setattr(jobs, "async_task", lambda name, trial_id, **kw: sent.append(trial_id))

    def drain(job):
        jobs.advance(job.pk)
        while sent:
            jobs.run_job_trial(sent.pop(0))
        job.refresh_from_db()
        return job

    return drain


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_an_agent_that_kills_its_sandbox_forks_without_end_or_fills_the_disk_fails_alone_and_the_job_goes_on(
    local_host, examples, project, owner, worker, monkeypatch, settings, runtime
):
    hostile = {
        "killer": ShellAgent("killer", "kill -9 -1; kill -9 1; exit 0"),
        "forker": ShellAgent("forker", "f() { f | f & }; f; sleep 5"),
        "filler": ShellAgent("filler", "cat /dev/zero > /app/fill; dd if=/dev/zero of=/tmp/fill bs=1M count=100000; exit 0"),
    }
    monkeypatch.setitem(AGENTS, "killer", hostile["killer"])
    monkeypatch.setitem(AGENTS, "forker", hostile["forker"])
    monkeypatch.setitem(AGENTS, "filler", hostile["filler"])
    settings.SANDBOX_PIDS = 256  # the default, stated: at 512 the forking agent held gVisor's engine calls past 60 s
    settings.SANDBOX_MEMORY_MB = 256  # the writable places are tmpfs counted against it: the filler meets it soon
    settings.MAX_ERROR_FRACTION = 0.1
    fund(project, 1000)
    job = jobs.create_job(
        project, owner, version=examples, agents=["killer", "forker", "filler", "oracle"], tasks=["upper-names"], budget_cents=100, runtime=runtime
    )
    job = worker(job)

    trials = {t.agent: t for t in job.trials.all()}
    # It ran every trial to its end; any of the four erroring (25%, past the tenth a job may lose) fails it, saying so.
    errored = [t for t in trials.values() if t.status == Trial.Status.ERRORED]
    assert job.status == (Job.Status.FAILED if errored else Job.Status.FINISHED), job.status_message
    assert (trials["oracle"].status, trials["oracle"].reward) == ("succeeded", 1.0)
    for name in hostile:
        trial = trials[name]
        # Each ends on its own: scored 0 by the verifier, or errored naming why; never the platform's fault, never a 1.
        assert trial.status in (Trial.Status.SUCCEEDED, Trial.Status.ERRORED), (name, trial.status)
        assert trial.reward in (0.0, None) and not trial.platform_fault, (name, trial.reward, trial.error)
    assert LedgerEntry.objects.filter(kind=LedgerEntry.Kind.REFUND).count() == 0


# -- an agent that calls a model, through the egress proxy -------------------------------------------------------------

SOLVE = "sed -e 's/^ *//' -e 's/ *$//' /app/names.txt | tr a-z A-Z > /app/names_upper.txt"


def scripted(commands: list[str]):
    """A model that asks for each command in turn (one tool call per answer), then says it is done."""

    def reply(body):
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        if done < len(commands):
            call = {"id": f"call_{done}", "type": "function", "function": {"name": "shell", "arguments": json.dumps({"command": commands[done]})}}
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": "assistant", "content": "Done."}

    return reply


@pytest.fixture
def model_agent_job(local_host, examples, project, owner, worker, egress, settings):
    settings.EVAL_ALLOW_PRIVATE_URLS = True

    def run(commands: list[str], **job):
        with FakeOpenAI(reply=scripted(commands), host=OUTSIDE_ADDRESS) as fake:
            deployment = Deployment.objects.create(
                project=project, name="scripted", base_url=fake.url, model="scripted-model", api_key="sk-trial-secret-123456"
            )
            made = jobs.create_job(
                project, owner, version=examples, agents=["reference"], deployments=[deployment], tasks=["upper-names"], budget_cents=100, **job
            )
            done = worker(made)
            return done, done.trials.get(), fake

    fund(project, 1000)
    return run


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_the_reference_agent_solves_a_task_through_the_egress_proxy_on_the_jobs_deployment(model_agent_job, runtime):
    job, trial, fake = model_agent_job([SOLVE], runtime=runtime)
    assert (trial.status, trial.reward, trial.error, trial.flagged) == ("succeeded", 1.0, "", False), trial.agent_output
    assert trial.contestant == "reference · scripted" and trial.runtime == runtime
    # Its trajectory is the model's: the command asked for, run in the task's sandbox, then the answer.
    steps = trial.trajectory["steps"]
    assert [c["command"] for s in steps for c in s["commands"]] == [SOLVE] and steps[-1]["text"] == "Done."
    assert [(r["path"], r["body"]["model"], r["auth"]) for r in fake.requests] == [
        ("/v1/chat/completions", "scripted-model", "Bearer sk-trial-secret-123456")
    ] * 2
    # The model was reached through the proxy, and only it and the platform, where the agent's spans went (the
    # proxy's record lands within a flush, 0.5 s).
    platform = urlsplit(settings.BELVEDIR_BASE_URL).hostname
    wait_for(lambda: len(egress_record(trial)) == 2, timeout=10, interval=0.1)
    assert sorted((d["host"], d["refused"]) for d in egress_record(trial)) == sorted([(OUTSIDE_ADDRESS, ""), (platform, "")])
    # The deployment's key never shows.
    assert "sk-trial-secret-123456" not in json.dumps(trial.trajectory) + trial.agent_output
    assert EgressGrant.objects.get(owner_kind="trial", owner_id=str(trial.pk)).revoked_at is not None
    # Its spans, sent with the trial's own key through the proxy, are the trial's session in Traces: the task, each
    # model turn and the command; the key is dead once the trial ended.
    session = TraceSession.objects.get(project=job.project, session_id=f"trial-{trial.pk}")
    assert session.trial == trial and (session.input_tokens, session.output_tokens) == (trial.input_tokens, trial.output_tokens) != (0, 0)
    spans = Span.objects.filter(project=job.project, session_id=session.session_id)
    assert sorted(spans.values_list("span_kind", flat=True)) == ["llm", "llm", "tool", "workflow"]
    assert spans.get(span_kind="tool").attributes["tool.command"] == SOLVE
    assert not ApiKey.objects.get(pk=trial.api_key_id).is_active


def test_an_agent_looking_for_the_answer_finds_no_tests_and_no_way_out_and_is_flagged(model_agent_job):
    probes = [
        "ls /tests /solution /logs/verifier; cat /tests/test.sh",
        "python3 -c \"import urllib.request; urllib.request.urlopen('https://tbench.ai/', timeout=5)\"; echo exit=$?",
        "echo 1 > /logs/verifier/reward.txt",
        "python3 -c \"import urllib.request; urllib.request.urlopen('http://169.254.169.254/latest/meta-data/', timeout=5)\"; echo exit=$?",
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 5432), 3)\"; echo exit=$?",
    ]
    job, trial, _ = model_agent_job(probes, deny_hosts=["answers.example"])
    outputs = [c["output"] for s in trial.trajectory["steps"] for c in s["commands"]]
    assert "No such file or directory" in outputs[0] and "exit=0" not in outputs[1]
    # The cloud's metadata address and the host's database: refused by the proxy, and no route around it.
    assert "exit=1" in outputs[3] and "exit=1" in outputs[4] and "Connection refused" in outputs[4]
    assert (trial.status, trial.reward) == ("succeeded", 0.0)  # the verifier's own reward, not the agent's 1
    reasons = " ".join(trial.flag_reasons)
    assert trial.flagged and "named a test's or the solution's files" in reasons and "/logs/verifier" in reasons
    # Refused by the grant's allowlist and recorded by the proxy (its record is written within a flush, 0.5 s):
    # shown as a flag wherever the trial is read.
    wait_for(lambda: "tbench.ai" in {d["host"] for d in egress_record(trial) if d["refused"]}, timeout=10, interval=0.1)
    shown = {t.pk: t for cell in matrix(job)[2].values() for t in cell.trials}[trial.pk]
    assert shown.is_flagged and "The agent tried to reach tbench.ai (refused: " in " ".join(shown.all_flag_reasons)


FORGE = """cat > /tmp/forge.py <<'PY'
import json, os, time, urllib.error, urllib.request
base, key = os.environ["BELVEDIR_BASE_URL"], os.environ["BELVEDIR_API_KEY"]
def send(path, payload):
    request = urllib.request.Request(base + path, json.dumps(payload).encode(), {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        print(path, urllib.request.urlopen(request, timeout=10).read().decode())
    except urllib.error.HTTPError as exc:
        print(path, exc.code)
now = time.time_ns()
span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "forged", "startTimeUnixNano": str(now), "endTimeUnixNano": str(now + 1000),
        "attributes": [{"key": "session.id", "value": {"stringValue": "victim"}}, {"key": "leak", "value": {"stringValue": os.environ["LLM_API_KEY"]}}]}
send("/api/v1/traces", {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
send("/api/v1/outcomes", {"session_id": "victim", "outcome": "success"})
PY
python3 /tmp/forge.py"""


def test_an_agent_using_its_trace_key_writes_only_its_trials_session_and_its_secrets_are_masked(model_agent_job):
    job, trial, _ = model_agent_job(['echo "$LLM_API_KEY $BELVEDIR_API_KEY"', FORGE])
    assert trial.status == "succeeded", (trial.error, trial.agent_output)
    outputs = [c["output"] for s in trial.trajectory["steps"] for c in s["commands"]]
    # Another session's spans and outcome: refused, and said so to the agent.
    assert '"rejectedSpans": "1"' in outputs[1] and "writes only its own session (trial-" in outputs[1] and "/api/v1/outcomes 403" in outputs[1]
    assert not TraceSession.objects.filter(session_id="victim").exists() and not Span.objects.filter(name="forged").exists()
    # What it printed went into its own session's tool span, its secrets masked there as in its trajectory.
    raw_key = trial.secret_values[0]
    stored = json.dumps(list(Span.objects.filter(session_id=f"trial-{trial.pk}").values_list("attributes", flat=True)))
    assert "echo" in stored and "sk-trial-secret-123456" not in stored and raw_key not in stored
    assert "sk-trial-secret-123456" not in json.dumps(trial.trajectory) and raw_key not in json.dumps(trial.trajectory) + trial.agent_output


# -- an agent installed from a package index, through the egress proxy --------------------------------------------------

AGENT_MODULE = """import json, os, subprocess, urllib.request

def main():
    # Ask the job's deployment once (through the proxy, as every request from here), then do the work.
    body = json.dumps({"model": os.environ["LLM_MODEL"], "messages": [{"role": "user", "content": open(os.environ["AGENT_INSTRUCTION_FILE"]).read()}]})
    request = urllib.request.Request(os.environ["LLM_BASE_URL"] + "/chat/completions", body.encode(), {"Content-Type": "application/json"})
    said = json.load(urllib.request.urlopen(request, timeout=30))["choices"][0]["message"]["content"]
    subprocess.run(%r, shell=True, check=True)
    os.makedirs(os.path.dirname(os.environ["AGENT_TRAJECTORY_FILE"]), exist_ok=True)
    json.dump({"agent": "belvedir-upper-agent", "steps": [{"text": said, "commands": [{"command": %r, "output": ""}]}]}, open(os.environ["AGENT_TRAJECTORY_FILE"], "w"))
"""


def wheel() -> tuple[str, bytes]:
    """A pure-Python wheel of a tiny agent with a console script, as an index would serve it."""
    name = "belvedir_upper_agent-1.0-py3-none-any.whl"
    info = "belvedir_upper_agent-1.0.dist-info"
    files = {
        "belvedir_upper_agent/__init__.py": AGENT_MODULE % (SOLVE, SOLVE),
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: belvedir-upper-agent\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: belvedir-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[console_scripts]\nbelvedir-upper-agent = belvedir_upper_agent:main\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return name, out.getvalue()


@contextlib.contextmanager
def files_server(host: str, pages: dict[str, tuple[bytes, str]]):
    """`pages` ({path: (body, content type)}, which may be filled once the origin is known) served on `host`, the
    test proxy's allowed outside address; yields the origin and the paths asked, in order."""
    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            body, kind = pages.get(self.path, (b"not here", "text/plain"))
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((host, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{host}:{server.server_address[1]}", asked
    finally:
        server.shutdown()


@contextlib.contextmanager
def package_index(host: str):
    """A PEP 503 simple index serving the one wheel."""
    filename, data = wheel()
    digest = hashlib.sha256(data).hexdigest()
    pages = {
        "/simple/belvedir-upper-agent/": (f'<a href="/files/{filename}#sha256={digest}">{filename}</a>'.encode(), "text/html"),
        f"/files/{filename}": (data, "application/octet-stream"),
    }
    with files_server(host, pages) as (origin, asked):
        yield f"{origin}/simple", asked


def test_an_agent_installed_from_the_package_index_solves_a_task_through_the_proxy(local_host, examples, project, owner, worker, egress, settings):
    settings.EVAL_ALLOW_PRIVATE_URLS = True
    fund(project, 1000)
    with package_index(OUTSIDE_ADDRESS) as (index, asked), FakeOpenAI(answer=lambda text: "Upper-case them.", host=OUTSIDE_ADDRESS) as fake:
        settings.AGENT_PIP_INDEX_URL = index
        deployment = Deployment.objects.create(project=project, name="m", base_url=fake.url, model="m")
        job = jobs.create_job(
            project, owner, version=examples, agents=["pip:belvedir-upper-agent==1.0"], deployments=[deployment], tasks=["upper-names"],
            budget_cents=100, runtime="runc", agent_commands={"pip:belvedir-upper-agent==1.0": "belvedir-upper-agent"},
        )  # fmt: skip
        trial = worker(job).trials.get()
    assert (trial.status, trial.reward, trial.error) == ("succeeded", 1.0, ""), trial.agent_output
    assert trial.contestant == "pip:belvedir-upper-agent==1.0 · m" and trial.trajectory["steps"][0]["text"] == "Upper-case them."
    assert "/simple/belvedir-upper-agent/" in asked and len(fake.requests) == 1
    wait_for(lambda: len(egress_record(trial)) == 2, timeout=10, interval=0.1)
    assert {(d["host"], d["refused"]) for d in egress_record(trial)} == {(OUTSIDE_ADDRESS, "")}


# -- an agent installed from the npm registry, through the egress proxy --------------------------------------------------

# Node's own http, through the proxy HTTP_PROXY names (as every request from a sandbox must go): Node's fetch would
# ignore it, and npm's agents (claude-code, codex) read HTTPS_PROXY themselves.
AGENT_JS = """#!/usr/bin/env node
const fs = require("fs"), http = require("http"), path = require("path"), { execSync } = require("child_process");
const SOLVE = %s;
const proxy = new URL(process.env.HTTP_PROXY), target = process.env.LLM_BASE_URL + "/chat/completions";
const body = JSON.stringify({ model: process.env.LLM_MODEL, messages: [{ role: "user", content: fs.readFileSync(process.env.AGENT_INSTRUCTION_FILE, "utf8") }] });
const auth = Buffer.from(decodeURIComponent(proxy.username) + ":" + decodeURIComponent(proxy.password)).toString("base64");
const headers = { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), Host: new URL(target).host, "Proxy-Authorization": "Basic " + auth };
http.request({ host: proxy.hostname, port: proxy.port, method: "POST", path: target, headers }, (response) => {
  let data = "";
  response.on("data", (chunk) => (data += chunk));
  response.on("end", () => {
    const said = JSON.parse(data).choices[0].message.content;
    execSync(SOLVE);
    fs.mkdirSync(path.dirname(process.env.AGENT_TRAJECTORY_FILE), { recursive: true });
    fs.writeFileSync(process.env.AGENT_TRAJECTORY_FILE, JSON.stringify({ agent: "belvedir-upper-agent", steps: [{ text: said, commands: [{ command: SOLVE, output: "" }] }] }));
  });
}).end(body);
"""


def npm_tarball() -> bytes:
    """An npm package of the tiny agent above, with its command in `bin`, as a registry serves it."""
    files = {
        "package/package.json": (json.dumps({"name": "belvedir-upper-agent", "version": "1.0.0", "bin": {"belvedir-upper-agent": "agent.js"}}).encode(), 0o644),
        "package/agent.js": ((AGENT_JS % json.dumps(SOLVE)).encode(), 0o755),
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for path, (data, mode) in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), mode
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


@contextlib.contextmanager
def npm_registry(host: str):
    """A registry serving the one package's document and tarball (with npm's integrity)."""
    tarball, pages = npm_tarball(), {}
    with files_server(host, pages) as (origin, asked):
        dist = {
            "tarball": f"{origin}/belvedir-upper-agent/-/belvedir-upper-agent-1.0.0.tgz",
            "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode(),
            "shasum": hashlib.sha1(tarball).hexdigest(),
        }
        version = {"name": "belvedir-upper-agent", "version": "1.0.0", "bin": {"belvedir-upper-agent": "agent.js"}, "dist": dist}
        document = {"name": "belvedir-upper-agent", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": version}}
        pages["/belvedir-upper-agent"] = (json.dumps(document).encode(), "application/json")
        pages["/belvedir-upper-agent/-/belvedir-upper-agent-1.0.0.tgz"] = (tarball, "application/octet-stream")
        yield f"{origin}/", asked


def test_an_agent_installed_from_the_npm_registry_solves_a_task_through_the_proxy(local_host, examples, project, owner, worker, egress, settings):
    settings.EVAL_ALLOW_PRIVATE_URLS = True
    fund(project, 1000)
    name = "npm:belvedir-upper-agent@1.0.0"
    with npm_registry(OUTSIDE_ADDRESS) as (registry, asked), FakeOpenAI(answer=lambda text: "Upper-case them.", host=OUTSIDE_ADDRESS) as fake:
        settings.AGENT_NPM_REGISTRY_URL = registry
        deployment = Deployment.objects.create(project=project, name="m", base_url=fake.url, model="m")
        job = jobs.create_job(
            project, owner, version=examples, agents=[name], deployments=[deployment], tasks=["upper-names"],
            budget_cents=100, runtime="runsc", agent_commands={name: "belvedir-upper-agent"},
        )  # fmt: skip
        trial = worker(job).trials.get()
    assert (trial.status, trial.reward, trial.error) == ("succeeded", 1.0, ""), trial.agent_output
    assert trial.contestant == f"{name} · m" and trial.trajectory["steps"][0]["text"] == "Upper-case them."
    assert asked == ["/belvedir-upper-agent", "/belvedir-upper-agent/-/belvedir-upper-agent-1.0.0.tgz"] and len(fake.requests) == 1
    wait_for(lambda: len(egress_record(trial)) == 2, timeout=10, interval=0.1)
    assert {(d["host"], d["refused"]) for d in egress_record(trial)} == {(OUTSIDE_ADDRESS, "")}
