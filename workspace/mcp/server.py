"""The MCP server, built once from the tool table: each tool a function whose signature is its arguments (the SDK
derives and checks the input schema from it), whose body asks the API endpoint it twins as the caller.

Also two resources for the large objects (a trajectory, an eval's samples) and two prompts for the common
questions. Who is calling (their Authorization header and the host they asked) is set by view.py per request.
"""

import inspect
import json
import logging
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.types import ToolAnnotations
from pydantic import Field

from agent_tasks.agents import calls_a_model

from . import sizing, twin
from .tools import TOOLS, Arg, Tool

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Caller:
    authorization: str
    host: str


caller: ContextVar[Caller] = ContextVar("mcp_caller")

INSTRUCTIONS = (
    "Belvedir measures AI agents and models: harness runs, evals (benchmarks and datasets against deployments), "
    "suites, agent jobs (Harbor-format tasks), trace sessions and their trajectories. Every tool is the twin of a "
    "REST endpoint under /api/v1 and answers as it does. Lists come a page at a time: pass next_cursor back as "
    "cursor. Long texts are folded with their length. Writing tools need a key of scope 'full' and take a budget; "
    "try them with dry_run first."
)


def _ask(method: str, path: str, query=None, body=None) -> twin.Answer:
    who = caller.get()
    return twin.call(who.authorization, method, path, query, body, host=who.host)


def _annotation(arg: Arg):
    constraints = {"description": arg.description}
    if arg.max_length is not None:
        constraints["max_length"] = arg.max_length
    if arg.minimum is not None:
        constraints["ge"] = arg.minimum
    if arg.maximum is not None:
        constraints["le"] = arg.maximum
    kind = list[str] if arg.type is list else arg.type
    if arg.type is list:
        constraints["max_length"] = 100
    return Annotated[kind if arg.required else kind | None, Field(**constraints)]


def _signature(tool: Tool) -> inspect.Signature:
    params = [
        inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY, annotation=_annotation(a), default=inspect.Parameter.empty if a.required else None)
        for a in tool.args
    ]
    if tool.paged:
        params.append(
            inspect.Parameter(
                "limit", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[int | None, Field(ge=1, le=1000, description="How many to return.")], default=None
            )
        )
        params.append(
            inspect.Parameter(
                "cursor",
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[str | None, Field(max_length=2000, description="next_cursor of the previous answer.")],
                default=None,
            )
        )
    params.sort(key=lambda p: p.default is not inspect.Parameter.empty)
    return inspect.Signature(params)


def run_tool(tool: Tool, arguments: dict) -> dict:
    """The tool's answer: its endpoint's JSON, paged and sized; a ToolError carrying the API's own error."""
    in_path = {a.name for a in tool.args if "{" + a.name + "}" in tool.path}
    # Encoded as a client would: a session id may hold "/", "?", or characters outside Latin-1.
    path = tool.path.format(**{name: quote(str(arguments[name]), safe="") for name in in_path})
    rest = {k: v for k, v in arguments.items() if k not in in_path and v is not None and k not in ("cursor", "dry_run")}
    if tool.writes:
        body = rest[tool.body_arg] if tool.body_arg else rest
        if arguments.get("dry_run"):
            return {"dry_run": True, "nothing_done": True, "would_send": {"method": tool.method, "path": path, "body": body}, **estimate(tool, body)}
        answer = _ask(tool.method, path, body=body)
    else:
        query = {k: str(v).lower() if isinstance(v, bool) else v for k, v in rest.items()}
        if arguments.get("cursor"):
            try:
                query.update(sizing.query_of(arguments["cursor"]))
            except ValueError as exc:
                raise ToolError(str(exc)) from None
        answer = _ask("GET", path, query=query)
    if not answer.ok:
        raise ToolError(answer.error())
    return shaped(tool, answer.data, query if not tool.writes else {})


def shaped(tool: Tool, data, query: dict) -> dict:
    """The API's answer as the tool gives it: pages' `next` links as cursors, lists under `results`, sized."""
    if isinstance(data, list):
        data = {"results": data}
    items_key = "steps" if isinstance(data, dict) and "steps" in data else "results"
    if isinstance(data, dict) and ("next" in data or "previous" in data):
        data = {k: v for k, v in data.items() if k not in ("next", "previous")} | {"next_cursor": sizing.cursor_of(data.get("next"))}
    how = "read it whole from the API endpoint " + tool.path + " or the trajectory resource"
    fitted = sizing.fit(data, items_key=items_key if tool.paged or items_key in data else None, how=how)
    if "cut" in fitted and "count" in fitted:
        # A limit-and-offset page cut short: the cursor goes on from the first item left out.
        kept, offset = len(fitted[items_key]), int(query.get("offset") or 0)
        fitted["next_cursor"] = sizing.cursor_for({**query, "limit": max(kept, 1), "offset": offset + kept})
    return fitted


def estimate(tool: Tool, body: dict) -> dict:
    """What a write would spend at most: its budget, and for a job the trials it would hold and their charges."""
    if tool.name != "start_job":
        return {"spends_at_most": f"${body.get('max_cost')} of the deployments' tokens (max_cost)"}
    sets = _ask("GET", "/api/v1/task-sets")
    found = next((s for s in sets.data or [] if str(s["id"]) == str(body["task_set"]) or s["name"] == body["task_set"]), None) if sets.ok else None
    if found is None:
        raise ToolError(f"No task set {body['task_set']!r} in this project.")
    detail = _ask("GET", f"/api/v1/task-sets/{found['id']}").data
    tasks = len(detail["versions"][0]["tasks"]) if detail.get("versions") else 0
    # As jobs.contestants counts them: an agent that calls a model is one column per deployment.
    columns = sum(len(body.get("deployments") or []) if calls_a_model(agent) else 1 for agent in body["agents"])
    trials = tasks * columns * (body.get("attempts") or 1)
    price = settings.TRIAL_PRICE_CENTS
    return {
        "trials": trials,
        "charged_at_most": f"${min(trials * price / 100, float(body['budget'])):.2f} ({price}¢ a trial, within the ${body['budget']} budget)",
    }


def _tool_function(tool: Tool):
    def call(**arguments):
        return run_tool(tool, arguments)

    async def handler(**arguments):
        # The ORM in the request's own thread (thread_sensitive), as a view's: the SDK would otherwise run a sync
        # tool in a worker thread of its own, with another database connection.
        return await sync_to_async(call)(**arguments)

    handler.__name__ = tool.name
    handler.__doc__ = tool.description
    handler.__signature__ = _signature(tool)
    return handler


def build() -> MCPServer:
    server = MCPServer("belvedir", instructions=INSTRUCTIONS, log_level="WARNING")
    for tool in TOOLS:
        server.add_tool(
            _tool_function(tool),
            name=tool.name,
            description=tool.description + (" Needs a key of scope 'full'." if tool.writes else ""),
            annotations=ToolAnnotations(read_only_hint=not tool.writes, destructive_hint=False, idempotent_hint=not tool.writes),
            structured_output=False,
        )

    @server.resource(
        "belvedir://sessions/{session_id}/trajectory",
        mime_type="application/json",
        description="A session's trajectory (its first 200 steps; get_trajectory pages the rest).",
    )
    async def trajectory(session_id: str) -> str:
        return await sync_to_async(_resource)(f"/api/v1/sessions/{session_id}/steps", {"page_size": 200})

    @server.resource(
        "belvedir://evals/{eval_id}/samples", mime_type="application/json", description="An eval's first 200 samples (list_eval_samples pages the rest)."
    )
    async def samples(eval_id: str) -> str:
        return await sync_to_async(_resource)(f"/api/v1/evals/{eval_id}/samples", {"limit": 200})

    @server.prompt(description="Explain why eval B scored lower (or higher) than eval A.")
    def explain_regression(a: str, b: str) -> list:
        return [
            UserMessage(
                f"Eval {b} is a candidate against eval {a}. Call compare_evals(a={a}, b={b}) for the paired delta, its interval "
                "and the flipped rows; read a few flipped samples with list_eval_samples; then explain what changed, whether "
                "the difference is real (the verdict) and what the flipped rows have in common."
            )
        ]

    @server.prompt(description="Summarise an agent job: what solved what, what failed and why.")
    def summarise_job(job_id: str) -> list:
        return [
            UserMessage(
                f"Summarise job {job_id}: call get_job for pass@k and pass^k per contestant, list_job_trials for the failures "
                "and flags, and get_trial on two failing trials to read their trajectory and verifier output. Say which tasks "
                "no contestant solved and whether any trial was flagged for reward hacking."
            )
        ]

    return server


def _resource(path: str, query: dict) -> str:
    answer = _ask("GET", path, query=query)
    if not answer.ok:
        raise ValueError(answer.error())
    return json.dumps(sizing.fit(answer.data, items_key="steps" if "steps" in (answer.data or {}) else "results", how="page it with the tool"), default=str)


server = build()
