"""The deployment client: requests to an OpenAI-compatible deployment, with bounded retries, over one HTTP session.

The engine, the judges and the connection test all ask deployments through
it, never through each other: a completion (chat, or a completions prompt),
an option's log-likelihood, and the session they share. Every request is
checked against the outbound policy, never follows a redirect, and is retried
with exponential backoff and jitter on 429, 5xx and connection errors.
"""

import asyncio
import random
import time
from dataclasses import dataclass

import aiohttp
import orjson
from django.conf import settings

from belvedir.core.netpolicy import Refused, outbound_policy

from . import loglikelihood
from .models import Deployment
from .outbound import PolicyResolver, RefusedConnection, check_literal, peer_is_public

RETRY_STATUSES = {429, 500, 502, 503, 504}


class RequestFailed(Exception):
    pass


@dataclass
class Completion:
    text: str
    latency_ms: float
    prompt_tokens: int | None
    completion_tokens: int | None
    # A chat reply's tool calls, {"name", "arguments"} each ([] when it made none); None for a completions reply.
    tool_calls: list[dict] | None = None


async def complete(client: aiohttp.ClientSession, deployment: Deployment, messages: list[dict], generation: dict, fields: dict | None = None) -> Completion:
    """One completion, with bounded retries and exponential backoff with jitter; `fields` join a chat request (a row's tools)."""
    if deployment.api_style == Deployment.Style.CHAT:
        path, payload = "/chat/completions", {"model": deployment.model, "messages": messages, **generation, **(fields or {})}
    else:
        prompt = "\n\n".join(m["content"] for m in messages)
        path, payload = "/completions", {"model": deployment.model, "prompt": prompt, **generation}
    body, latency_ms = await _post(client, deployment, path, payload)
    return _parse(body, deployment, latency_ms)


async def option_loglikelihood(client: aiohttp.ClientSession, deployment: Deployment, option: loglikelihood.Choice) -> loglikelihood.Loglikelihood:
    """Log-likelihood mode: one option's continuation scored by a completions deployment, with _post()'s retries."""
    body, latency_ms = await _post(client, deployment, "/completions", loglikelihood.payload(deployment.model, option))
    try:
        return loglikelihood.parse(body, option, latency_ms)
    except loglikelihood.Unusable as exc:
        raise RequestFailed(str(exc)) from None


async def _post(client: aiohttp.ClientSession, deployment: Deployment, path: str, payload: dict) -> tuple[bytes, float]:
    """A 200's body and its latency in ms, with bounded retries and exponential backoff with jitter."""
    url = deployment.base_url.rstrip("/") + path
    headers = {"Content-Type": "application/json"}
    if deployment.api_key:
        headers["Authorization"] = f"Bearer {deployment.api_key}"
    data = orjson.dumps(payload)
    try:
        check_literal(url, outbound_policy())
    except Refused as exc:
        raise RequestFailed(f"Refused: {exc}") from None
    attempts = settings.EVAL_MAX_ATTEMPTS
    for attempt in range(1, attempts + 1):
        started = time.monotonic()
        try:
            # Never follow a redirect: a public endpoint answering 307 would
            # otherwise have this worker re-send the body to wherever it names.
            async with client.post(url, data=data, headers=headers, allow_redirects=False) as response:
                public = peer_is_public(response)
                body = await response.read()
                status = response.status
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, RefusedConnection):
                raise RequestFailed(f"Refused: {exc.os_error.strerror}") from None
            problem = f"{type(exc).__name__}: {exc}"[:300]
        except (TimeoutError, aiohttp.ClientError) as exc:
            problem = f"{type(exc).__name__}: {exc}"[:300]
        else:
            if status == 200:
                return body, (time.monotonic() - started) * 1000
            if 300 <= status < 400:
                raise RequestFailed(f"HTTP {status}: the endpoint redirects, and redirects are not followed; use the final URL.")
            # An error page from a private address (an operator-allowed network,
            # development) is not repeated to the user: it may be internal.
            problem = f"HTTP {status}: {body[:200].decode(errors='replace')}" if public else f"HTTP {status} (from a private address; body not shown)"
            if status not in RETRY_STATUSES:
                raise RequestFailed(problem)
        if attempt < attempts:
            delay = min(settings.EVAL_RETRY_BASE_SECONDS * 2 ** (attempt - 1), 20) * (0.5 + random.random())
            await asyncio.sleep(delay)
    raise RequestFailed(f"Gave up after {attempts} attempts: {problem}")


def _parse(raw: bytes, deployment, latency_ms) -> Completion:
    try:
        body = orjson.loads(raw)
        choice = body["choices"][0]
        if deployment.api_style == Deployment.Style.CHAT:
            text, tool_calls = choice["message"].get("content"), _tool_calls(choice["message"])
        else:
            text, tool_calls = choice["text"], None
    except (orjson.JSONDecodeError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise RequestFailed(f"Unexpected response shape: {exc}") from None
    usage = body.get("usage") or {}
    return Completion(text or "", latency_ms, usage.get("prompt_tokens"), usage.get("completion_tokens"), tool_calls)


def _tool_calls(message: dict) -> list[dict]:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call["function"]
        arguments = function.get("arguments")
        # Some servers send the arguments parsed: kept as the JSON text OpenAI sends.
        calls.append({"name": str(function.get("name") or ""), "arguments": arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()})
    return calls


def http_session(limit: int) -> aiohttp.ClientSession:
    # aiohttp rather than httpx here: at 100 requests in flight httpx's
    # connection pool added seconds per few hundred requests (bench/eval_engine.py).
    timeout = aiohttp.ClientTimeout(total=settings.EVAL_REQUEST_TIMEOUT_SECONDS, connect=10)
    connector = aiohttp.TCPConnector(limit=limit, resolver=PolicyResolver(outbound_policy()))
    return aiohttp.ClientSession(timeout=timeout, connector=connector)
