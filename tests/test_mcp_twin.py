"""The MCP tools' twin of the API, in-process (workspace/mcp/twin.py, server.run_tool): ids of any form reach the
API as a client's request would, through the same NUL guard, and a job's dry run counts what the job would hold.
The whole MCP server over HTTP, with the official SDKs, is tests/test_mcp.py's part."""

import pytest
from django.utils import timezone
from mcp.server.mcpserver.exceptions import ToolError

from agent_tasks.actions import import_task_set
from agent_tasks.agents import resolve
from agent_tasks.jobs import contestants
from belvedir.core.models import ApiKey
from evals.models import Deployment
from traces.models import TraceSession
from workspace.mcp import server
from workspace.mcp.tools import TOOLS

from .harness_fixtures import fund

pytestmark = pytest.mark.django_db

TOOL = {tool.name: tool for tool in TOOLS}


@pytest.fixture
def as_owner(project, owner):
    _, raw = ApiKey.issue(project=project, user=owner, name="mcp", scope=ApiKey.Scope.FULL)
    token = server.caller.set(server.Caller(authorization=f"Bearer {raw}", host="testserver"))
    yield
    server.caller.reset(token)


@pytest.mark.parametrize("session_id", ["şoför-1", "a/b?c=d#e", "日本語", "100%", "trial-٣"], ids=repr)
def test_a_session_id_of_any_form_is_read_as_the_api_reads_it(project, as_owner, session_id):
    TraceSession.objects.create(project=project, session_id=session_id, first_span_at=timezone.now(), last_span_at=timezone.now())
    found = server.run_tool(TOOL["get_session"], {"session_id": session_id})
    assert found["session_id"] == session_id


def test_a_nul_in_an_id_is_refused_as_the_api_refuses_it_never_a_500(project, as_owner):
    with pytest.raises(ToolError, match="400: The address contains a NUL character"):
        server.run_tool(TOOL["get_session"], {"session_id": "a\x00b"})


def test_a_jobs_dry_run_counts_a_trial_per_deployment_for_every_agent_that_calls_a_model(project, owner, as_owner, settings):
    fund(project, 10_000)
    settings.TRIAL_PRICE_CENTS = 5
    files = {
        f"{n}/{k}": v
        for n in ("a", "b")
        for k, v in {
            "task.toml": b'version = "1.0"\n',
            "instruction.md": b"Do it.\n",
            "tests/test.sh": b"exit 0\n",
            "environment/Dockerfile": b"FROM belvedir-sandbox:bookworm\n",
        }.items()
    }
    import_task_set(project, owner, "tasks", files)
    for name in ("m1", "m2", "m3"):
        Deployment.objects.create(project=project, name=name, base_url="https://example.com/v1", model=name)
    agents = ["nop", "reference", "pip:my-agent==1.0", "npm:my-agent@1.0.0"]
    body = {
        "task_set": "tasks",
        "agents": agents,
        "deployments": ["m1", "m2", "m3"],
        "attempts": 2,
        "budget": "100",
        "agent_commands": {"pip:my-agent==1.0": "run", "npm:my-agent@1.0.0": "run"},
    }
    dry = server.run_tool(TOOL["start_job"], {**body, "dry_run": True})
    made = len(contestants([resolve(a, body["agent_commands"]) for a in agents], ["m1", "m2", "m3"])) * 2 * 2
    assert dry["trials"] == made == (1 + 3 * 3) * 2 * 2
    assert dry["nothing_done"] and dry["charged_at_most"].startswith(f"${made * 5 / 100:.2f}")
