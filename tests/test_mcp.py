"""The MCP server against a live server, through the official Python SDK's client (and the TypeScript SDK's):
every tool beside the API endpoint it twins, scopes, project isolation, the size cap and bad arguments.

The parity test is generated from the tool table: a tool added without an example here fails it.
"""

import asyncio
import json
import subprocess
from decimal import Decimal
from pathlib import Path

import httpx2
import pytest
from django.utils import timezone
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from rest_framework.test import APIClient

from agent_tasks.actions import import_task_set
from agent_tasks.jobs import create_job
from agent_tasks.models import Job
from belvedir.core.models import ApiKey
from evals.datasets.versions import create_dataset
from evals.models import DatasetRow, Deployment, Eval, Sample, SuiteRun
from harnesses.models import Harness, Run
from monitors.models import Alert, Monitor, MonitorRun
from review.queues import create_queue
from traces.models import Evaluator, TraceSession
from workspace.mcp import sizing
from workspace.mcp.tools import TOOLS

from .test_trajectory import many_spans, post

pytestmark = pytest.mark.django_db(transaction=True)

TESTS = Path(__file__).resolve().parent
HELLO = TESTS.parent / "examples" / "harbor-format" / "hello"


def key(project, user, scope=ApiKey.Scope.FULL) -> str:
    return ApiKey.issue(project=project, user=user, name=f"mcp {scope}", scope=scope)[1]


def mcp(live_server, token: str | None, mode: str = "legacy"):
    """An SDK client on /mcp with the token (or none), as a coding agent's configuration would make it."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def session(work):
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(f"{live_server.url}/mcp", http_client=http), mode=mode) as client:
                return await work(client)

    return lambda work: asyncio.run(session(work))


def answer(result) -> dict | str:
    text = result.content[0].text
    return text if result.is_error else json.loads(text)


@pytest.fixture
def world(project, owner, settings, tmp_path, api):
    """One object of each kind the tools read, in the owner's project."""
    settings.MEDIA_ROOT = tmp_path / "media"
    harness = Harness.objects.create(project=project, created_by=owner, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    run = Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=50, status="succeeded", score=0.5)
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m", input_price_per_million=Decimal(1))
    dataset = create_dataset(project, owner, "ds", b'{"input": "a", "expected": "b"}\n')
    ev = Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1, status="succeeded", total=1, done_count=1, score=1.0)
    Sample.objects.create(eval=ev, row_index=0, input="1+1", reference="2", output="2", score=1.0)
    suite_run = SuiteRun.objects.create(project=project, suite_name="quick", entries=[])
    suite_run.deployments.add(deployment)
    evaluator = Evaluator.objects.create(project=project, name="e", scorer={"name": "contains", "options": {"expected": "x"}})
    monitor = Monitor.objects.create(project=project, name="m", suite_name="quick", deployment=deployment, cron="0 3 * * *", next_run_at=timezone.now())
    monitor_run = MonitorRun.objects.create(monitor=monitor, due_at=timezone.now(), suite_run=suite_run, verdict="regressed", reason="Worse on gsm8k.")
    queue = create_queue(project, owner, {"name": "q", "scores": [{"name": "ok", "kind": "boolean"}]})
    Alert.objects.create(
        project=project, monitor=monitor, kind="regressed", title="m: regressed", message="Worse.", first_run=monitor_run, last_run=monitor_run
    )
    post(api, many_spans("s-1", 3) + many_spans("s-2", 2))
    session = TraceSession.objects.get(session_id="s-1")
    hello = {p.relative_to(HELLO).as_posix(): p.read_bytes() for p in HELLO.rglob("*") if p.is_file()}
    version = import_task_set(project, owner, "tasks", hello)[0]
    job = create_job(project, owner, version=version, agents=["nop"], budget_cents=100)
    return {
        "harness": harness, "run": run, "deployment": deployment, "dataset": dataset, "eval": ev, "suite_run": suite_run,
        "evaluator": evaluator, "monitor": monitor, "queue": queue, "session": session, "job": job, "trial": job.trials.get(), "version": version,
    }  # fmt: skip


def examples(w) -> dict[str, dict]:
    """Arguments for each read tool, on the world's objects. A tool missing here fails the parity test."""
    return {
        "whoami": {},
        "get_balance": {},
        "list_benchmarks": {},
        "list_harnesses": {},
        "get_harness": {"harness_id": w["harness"].pk},
        "list_runs": {},
        "get_run": {"run_id": w["run"].pk},
        "list_deployments": {},
        "get_deployment": {"deployment_id": w["deployment"].pk},
        "list_evals": {},
        "get_eval": {"eval_id": w["eval"].pk},
        "list_eval_samples": {"eval_id": w["eval"].pk},
        "compare_evals": {"a": w["eval"].pk, "b": w["eval"].pk},
        "list_suite_runs": {},
        "get_suite_run": {"suite_run_id": w["suite_run"].pk},
        "compare_suite_runs": {"a": w["suite_run"].pk, "b": w["suite_run"].pk},
        "list_monitors": {},
        "get_monitor": {"monitor_id": w["monitor"].pk},
        "list_monitor_runs": {"monitor_id": w["monitor"].pk},
        "list_alerts": {"state": "open"},
        "list_review_queues": {},
        "get_review_progress": {"queue_id": w["queue"].pk},
        "get_review_agreement": {"queue_id": w["queue"].pk},
        "list_task_sets": {},
        "list_jobs": {},
        "get_job": {"job_id": w["job"].pk},
        "list_job_trials": {"job_id": w["job"].pk},
        "get_trial": {"trial_id": w["trial"].pk},
        "compare_jobs": {"a": w["job"].pk, "b": w["job"].pk},
        "list_datasets": {},
        "get_dataset": {"dataset_id": w["dataset"].pk},
        "list_dataset_rows": {"dataset_id": w["dataset"].pk},
        "list_evaluators": {},
        "get_evaluator": {"evaluator_id": w["evaluator"].pk},
        "list_evaluator_scores": {"evaluator_id": w["evaluator"].pk},
        "query_sessions": {},
        "get_session": {"session_id": "s-1"},
        "get_trajectory": {"session_id": "s-1"},
        "diff_trajectories": {"a": "s-1", "b": "s-2"},
    }


def twin_of(tool, args: dict) -> tuple[str, dict]:
    in_path = {name for name in args if "{" + name + "}" in tool.path}
    return tool.path.format(**{n: args[n] for n in in_path}), {k: v for k, v in args.items() if k not in in_path}


def test_every_read_tool_answers_what_its_api_endpoint_answers(live_server, world, project, owner):
    token = key(project, owner)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    reads = {t.name: t for t in TOOLS if not t.writes}
    given = examples(world)
    assert set(given) == set(reads), "each read tool needs an example here (and each example a tool)"

    async def work(client):
        listed = await client.list_tools()
        return [tool.name for tool in listed.tools], {name: await client.call_tool(name, args) for name, args in given.items()}

    names, results = mcp(live_server, token)(work)
    assert names == [t.name for t in TOOLS] and len(names) >= 20
    for name, result in results.items():
        assert not result.is_error, (name, result.content[0].text)
        path, query = twin_of(reads[name], given[name])
        expected = api.get(path, query).json()
        got = answer(result)
        if isinstance(expected, list):
            expected = {"results": expected}
        if isinstance(expected, dict) and ("next" in expected or "previous" in expected):
            expected = {k: v for k, v in expected.items() if k not in ("next", "previous")} | {"next_cursor": sizing.cursor_of(expected.get("next"))}
        assert got == expected, name


def test_lists_page_with_a_cursor_through_every_item(live_server, world, project, owner):
    for i in range(4):
        Eval.objects.create(project=project, deployment=world["deployment"], benchmark="gsm8k", seed=i)

    async def work(client):
        seen, cursor = [], None
        while True:
            page = answer(await client.call_tool("list_evals", {"limit": 2, **({"cursor": cursor} if cursor else {})}))
            seen += [e["id"] for e in page["results"]]
            cursor = page["next_cursor"]
            if not cursor:
                return seen, page["count"]

    seen, count = mcp(live_server, key(project, owner))(work)
    assert sorted(seen) == sorted(Eval.objects.values_list("pk", flat=True)) and count == 5 == len(seen)


def write_examples(w) -> dict[str, dict]:
    """An argument set for every write tool, each one the API would carry out for a full key."""
    return {
        "start_eval": {"deployment": "d", "benchmark": "gsm8k", "max_cost": 1.0},
        "start_suite_run": {"suite": "quick", "deployments": ["d"], "max_cost": 1.0},
        "start_job": {"task_set": "tasks", "agents": ["nop"], "budget": "1"},
        "retry_eval_errors": {"eval_id": w["eval"].pk},
        "add_sessions_to_dataset": {"payload": {"dataset": w["dataset"].pk, "sessions": ["s-1"]}},
        "create_evaluator": {"payload": {"name": "new", "scorer": {"name": "contains", "options": {"expected": "x"}}}},
    }


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in (Job, Eval, SuiteRun, Evaluator, Sample)} | {"rows": DatasetRow.objects.count()}


def test_a_read_key_reads_and_is_refused_every_write_naming_its_scope_with_nothing_done(live_server, world, project, owner):
    writes = {t.name for t in TOOLS if t.writes}
    given = write_examples(world)
    assert set(given) == writes, "each write tool needs an example here (and each example a tool)"
    before = counts()

    async def work(client):
        read = await client.call_tool("get_job", {"job_id": world["job"].pk})
        return read, {name: await client.call_tool(name, args) for name, args in given.items()}

    read, refused = mcp(live_server, key(project, owner, ApiKey.Scope.READ))(work)
    assert not read.is_error
    for name, result in refused.items():
        assert result.is_error and "403: This API key is read-only (scope 'read')" in result.content[0].text, (name, result.content[0].text)
    assert counts() == before


def test_a_full_key_starts_a_job_after_a_dry_run_that_does_nothing(live_server, world, project, owner):
    from .harness_fixtures import fund

    fund(project, 500)

    async def work(client):
        dry = answer(await client.call_tool("start_job", {"task_set": "tasks", "agents": ["oracle", "nop"], "attempts": 5, "budget": "1", "dry_run": True}))
        before = await asyncio.to_thread(Job.objects.count)
        made = answer(await client.call_tool("start_job", {"task_set": "tasks", "agents": ["nop"], "budget": "1"}))
        return dry, before, made

    dry, before, made = mcp(live_server, key(project, owner))(work)
    assert dry["nothing_done"] and dry["trials"] == 10 and dry["charged_at_most"].startswith("$0.50") and before == 1
    assert made["status"] == "running" and Job.objects.count() == 2


def test_another_projects_ids_answer_as_the_api_does_never_its_data(live_server, world, outsider, outsider_project):
    token = key(outsider_project, outsider)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    asked = {
        "get_job": ({"job_id": world["job"].pk}, f"/api/v1/jobs/{world['job'].pk}"),
        "get_trajectory": ({"session_id": "s-1"}, "/api/v1/sessions/s-1/steps"),
        "get_eval": ({"eval_id": world["eval"].pk}, f"/api/v1/evals/{world['eval'].pk}"),
    }

    async def work(client):
        return {name: await client.call_tool(name, args) for name, (args, _) in asked.items()}

    for name, result in mcp(live_server, token)(work).items():
        refused = api.get(asked[name][1])
        assert refused.status_code == 404
        assert result.is_error and result.content[0].text.endswith(f"404: {refused.json()['detail']}"), result.content[0].text


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({"job_id": "seven"}, "job_id"),
        ({}, "job_id"),
        ({"job_id": 0}, "greater than or equal to 1"),
        ({"job_id": 1, "cursor": "x" * 3000}, "cursor"),
    ],
)
def test_a_bad_argument_is_a_tool_error_naming_it(live_server, world, project, owner, args, says):
    result = mcp(live_server, key(project, owner))(
        lambda client: client.call_tool("get_job", args) if "cursor" not in args else client.call_tool("list_job_trials", args)
    )
    assert result.is_error and says in result.content[0].text


def test_no_key_a_revoked_key_and_an_ingest_key_are_refused_at_the_door(live_server, project, owner):
    import requests

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    assert requests.post(f"{live_server.url}/mcp", json=body, headers=headers).status_code == 401
    revoked = key(project, owner)
    ApiKey.objects.filter(project=project).update(revoked_at="2026-01-01T00:00Z")
    said = requests.post(f"{live_server.url}/mcp", json=body, headers={**headers, "Authorization": f"Bearer {revoked}"})
    assert (said.status_code, said.json()["detail"]) == (401, "This API key has been revoked.")
    ingest = requests.post(f"{live_server.url}/mcp", json=body, headers={**headers, "Authorization": f"Bearer {key(project, owner, ApiKey.Scope.INGEST)}"})
    assert ingest.status_code == 403 and "scope 'ingest'" in ingest.json()["detail"]
    assert requests.get(f"{live_server.url}/mcp", headers={"Authorization": f"Bearer {key(project, owner)}"}).status_code == 405


def test_an_answer_stays_under_the_cap_folding_long_texts_and_saying_how_to_get_the_rest(live_server, world, project, owner):
    Sample.objects.create(eval=world["eval"], row_index=1, input="x" * 50_000, reference="y", output="z" * 300_000, score=0.0)
    for i in range(2, 60):
        Sample.objects.create(eval=world["eval"], row_index=i, input=f"{i}" * 3_000, reference="y", output="w" * 3_900, score=0.0)

    async def work(client):
        return await client.call_tool("list_eval_samples", {"eval_id": world["eval"].pk, "limit": 60}), await client.read_resource(
            f"belvedir://evals/{world['eval'].pk}/samples"
        )

    result, resource = mcp(live_server, key(project, owner))(work)
    text = result.content[0].text
    assert len(text) <= sizing.MAX_CHARS + 1000
    page = json.loads(text)
    folded = next(s for s in page["results"] if s["row_index"] == 1)
    assert "[folded: 300,000 characters in all;" in folded["output"]
    assert page["cut"].startswith(f"{len(page['results'])} of this page's 60 items fit")
    rest = mcp(live_server, key(project, owner))(
        lambda client: client.call_tool("list_eval_samples", {"eval_id": world["eval"].pk, "cursor": page["next_cursor"]})
    )
    assert answer(rest)["results"][0]["row_index"] == page["results"][-1]["row_index"] + 1
    assert len(resource.contents[0].text) <= sizing.MAX_CHARS + 1000


def test_the_typescript_sdk_lists_and_calls_tools(live_server, world, project, owner):
    script = TESTS / "js" / "mcp_client.mjs"
    done = subprocess.run(
        ["node", str(script), f"{live_server.url}/mcp", key(project, owner), str(world["job"].pk)],
        cwd=TESTS / "js",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["tools"] >= 20 and said["whoami"]["project"]["id"] == project.pk and said["job"]["id"] == world["job"].pk


def test_the_2026_protocol_client_is_served_too(live_server, world, project, owner):
    result = mcp(live_server, key(project, owner), mode="auto")(lambda client: client.call_tool("get_job", {"job_id": world["job"].pk}))
    assert answer(result)["id"] == world["job"].pk
