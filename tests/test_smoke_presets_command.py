"""manage.py smoke_presets: each preset run for real against a deployment, pass or fail with a reason."""

import importlib
import io

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command

from belvedir.sandbox.models import SandboxHost
from evals.models import Deployment
from harnesses.models import Harness

from .conftest import OUTSIDE_ADDRESS
from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import fund

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]


def does_the_smoke_task(body):
    if not any(m["role"] == "tool" for m in body["messages"]):
        call = {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"command": "echo ok > smoke.txt"}'}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": "Done.\nRESULT: success"}


@pytest.fixture
def platform(settings, live_server, project, egress):
    settings.PRESET_REPO_ORG = ""
    settings.HARNESS_HEARTBEAT_SECONDS = 0.5
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL, "capacity": 4})
    importlib.import_module("harnesses.migrations.0006_presets_use_shipped_drivers").seed(apps, None)
    fund(project)
    return project


def smoke(*args):
    out = io.StringIO()
    try:
        call_command("smoke_presets", *args, stdout=out)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue()


def test_it_passes_a_preset_whose_run_scores(platform):
    with FakeOpenAI(reply=does_the_smoke_task, host=OUTSIDE_ADDRESS) as fake:
        Deployment.objects.create(project=platform, name="fake", base_url=fake.url, model="fake-model", api_key="sk-smoke-1")
        code, out = smoke("--deployment", "fake", "--only", "reference-agent")
    assert code == 0, out
    assert "PASS  reference-agent" in out and "score 1 (run #" in out
    harness = Harness.objects.get(project=platform, name="smoke: Tasks (reference agent)")
    assert {v.name: v.value for v in harness.env_vars.all()}["BELVEDIR_LIMIT"] == "1"
    assert harness.env_vars.get(name="LLM_API_KEY").secret


def test_it_fails_a_preset_with_the_reason(platform):
    Deployment.objects.create(project=platform, name="down", base_url="http://127.0.0.1:9/v1", model="m")
    code, out = smoke("--deployment", "down", "--only", "reference-agent", "--env", "AGENT_MAX_STEPS=2")
    assert code == 1
    assert "FAIL  reference-agent" in out and "The run command exited with code 1" in out
    assert "every task ended in a model error" in out
    assert out.rstrip().endswith("0 passed, 1 failed")


def test_it_refuses_unknown_presets_and_deployments(platform):
    with pytest.raises(CommandError, match="0 deployments"):
        smoke("--deployment", "nope")
    Deployment.objects.create(project=platform, name="d", base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(CommandError, match="No preset gaia2"):
        smoke("--deployment", "d", "--only", "gaia2")
