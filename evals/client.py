"""The deployment client: requests to an OpenAI-compatible deployment, with bounded retries, over one HTTP session.

The engine, the judges and the connection test all ask deployments through
it, never through each other: a completion (chat, or a completions prompt),
an option's log-likelihood, and the session they share. Every request is
checked against the outbound policy, never follows a redirect, and is retried
with exponential backoff and jitter on 429, 5xx and connection errors, never
sooner than the server's Retry-After. The engine's gate (evals/concurrency.py)
observes every answer, retries included, and holds no slot while one waits.
"""

import asyncio
import email.utils
import math
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import aiohttp
import orjson
from django.conf import settings

from belvedir.core.netpolicy import Refused, outbound_policy

from . import loglikelihood
from .models import Deployment
from .outbound import PolicyResolver, RefusedConnection, check_literal, peer_is_public
from .serving import Seen

RETRY_STATUSES = {429, 500, 502, 503, 504}
# A longer Retry-After is waited this long, then the request is sent again: three such waits fit in the
# 300 s a pass's grace keeps for backoffs and scoring (settings.EVAL_PASS_GRACE_SECONDS).
RETRY_AFTER_MAX_SECONDS = 30.0
# An over-capacity answer the engine's gate halves for is retried without counting an attempt (evals/concurrency.py);
# a request is sent at most this many times its attempts all the same.
UNCOUNTED_RETRIES = 3
# A /models answer read no further than this: a server listing thousands of models is not read whole.
MODELS_BODY_LIMIT = 1_000_000


class RequestFailed(Exception):
    pass


@dataclass
class Completion:
    text: str
    # None for an answer the response cache gave (no request went out).
    latency_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    # A chat reply's tool calls, {"name", "arguments"} each ([] when it made none); None for a completions reply.
    tool_calls: list[dict] | None = None
    # What the server says served it (OpenAI's `system_fingerprint`), when it says: the response cache keys on it.
    system_fingerprint: str | None = None


@dataclass(frozen=True)
class Request:
    """What is sent to a deployment: its path under the base URL and the JSON body (the response cache's key holds both)."""

    path: str
    payload: dict


def completion_request(deployment: Deployment, messages: list[dict], generation: dict, fields: dict | None = None) -> Request:
    """A chat request (`fields` join it: a row's tools), or for a completions deployment the messages as one prompt."""
    if deployment.api_style == Deployment.Style.CHAT:
        return Request("/chat/completions", {"model": deployment.model, "messages": messages, **generation, **(fields or {})})
    prompt = "\n\n".join(m["content"] for m in messages)
    return Request("/completions", {"model": deployment.model, "prompt": prompt, **generation})


def loglikelihood_request(deployment: Deployment, option: loglikelihood.Choice) -> Request:
    return Request("/completions", loglikelihood.payload(deployment.model, option))


async def complete(client: aiohttp.ClientSession, deployment: Deployment, messages: list[dict], generation: dict, fields: dict | None = None) -> Completion:
    """One completion, with send_request()'s retries."""
    body, latency_ms = await send_request(client, deployment, completion_request(deployment, messages, generation, fields))
    return completion_of(body, deployment, latency_ms)


def loglikelihood_of(body: bytes, option: loglikelihood.Choice, latency_ms: float | None) -> loglikelihood.Loglikelihood:
    try:
        return loglikelihood.parse(body, option, latency_ms)
    except loglikelihood.Unusable as exc:
        raise RequestFailed(str(exc)) from None


class Observer(Protocol):
    """What is told of every answer to a request and waits out its retries: the engine's gate (evals/concurrency.py)."""

    def observe(self, status: int | None, started: float) -> bool:
        """False when the failed attempt is not to count against the request's EVAL_MAX_ATTEMPTS."""

    async def backoff(self, delay: float) -> None: ...


async def send_request(
    client: aiohttp.ClientSession, deployment: Deployment, request: Request, observer: Observer | None = None, seen: Seen | None = None
) -> tuple[bytes, float]:
    """A 200's body and its latency in ms; `observer` (a gate the caller holds a slot of) learns of every answer, retries
    included, and `seen` (evals/serving.py) the headers of the 200."""
    return await _post(client, deployment, request.path, request.payload, observer, seen)


async def _post(
    client: aiohttp.ClientSession, deployment: Deployment, path: str, payload: dict, observer: Observer | None = None, seen: Seen | None = None
) -> tuple[bytes, float]:
    """A 200's body and its latency in ms, with bounded retries and exponential backoff with jitter, never sooner than a Retry-After."""
    url = deployment.base_url.rstrip("/") + path
    headers = {"Content-Type": "application/json"}
    if deployment.api_key:
        headers["Authorization"] = f"Bearer {deployment.api_key}"
    data = orjson.dumps(payload)
    try:
        check_literal(url, outbound_policy())
    except Refused as exc:
        raise RequestFailed(f"Refused: {exc}") from None
    attempts, attempt = settings.EVAL_MAX_ATTEMPTS, 0
    # The retries an observer does not count (over-capacity answers its gate halves for) are bounded too.
    for _ in range(attempts * UNCOUNTED_RETRIES):
        started = time.monotonic()
        status = retry_after = None
        try:
            # Never follow a redirect: a public endpoint answering 307 would
            # otherwise have this worker re-send the body to wherever it names.
            async with client.post(url, data=data, headers=headers, allow_redirects=False) as response:
                body = await response.read()
                status = response.status
                if status == 200 and seen is not None:
                    seen.headers(response.headers)
                if status != 200:
                    # Only a failure's body may be shown, and only from a public peer: not looked up for every answer.
                    public, retry_after = peer_is_public(response), retry_after_seconds(response.headers)
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, RefusedConnection):
                raise RequestFailed(f"Refused: {exc.os_error.strerror}") from None
            problem = f"{type(exc).__name__}: {exc}"[:300]
        except (TimeoutError, aiohttp.ClientError) as exc:
            problem = f"{type(exc).__name__}: {exc}"[:300]
        counted = observer.observe(status, started) if observer is not None else True
        if status == 200:
            return body, (time.monotonic() - started) * 1000
        if status is not None:
            if 300 <= status < 400:
                raise RequestFailed(f"HTTP {status}: the endpoint redirects, and redirects are not followed; use the final URL.")
            # An error page from a private address (an operator-allowed network,
            # development) is not repeated to the user: it may be internal.
            problem = f"HTTP {status}: {body[:200].decode(errors='replace')}" if public else f"HTTP {status} (from a private address; body not shown)"
            if status not in RETRY_STATUSES:
                raise RequestFailed(problem)
        attempt += counted
        if attempt >= attempts:
            break
        backoff = min(settings.EVAL_RETRY_BASE_SECONDS * 2 ** max(attempt - 1, 0), 20) * (0.5 + random.random())
        # Never sooner than the server asked, and spread over a fifth more: what it refused at once does not all return at once.
        delay = max(backoff, (retry_after or 0) * (1 + random.random() / 5))
        await (observer.backoff(delay) if observer is not None else asyncio.sleep(delay))
    tried = f"{attempt} attempts" if attempt >= attempts else f"{attempts * UNCOUNTED_RETRIES} requests"
    raise RequestFailed(f"Gave up after {tried}: {problem}")


def retry_after_seconds(headers) -> float | None:
    """How long a server asks to be left alone: Retry-After (seconds, or an HTTP date) or the `retry-after-ms` some send
    instead; at most RETRY_AFTER_MAX_SECONDS. None when it says nothing readable."""
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            seconds = float(ms) / 1000
        elif (value := headers.get("Retry-After")) is None:
            return None
        elif value.strip().replace(".", "", 1).isdigit():
            seconds = float(value)
        else:
            seconds = (email.utils.parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
    except (ValueError, TypeError):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_SECONDS) if math.isfinite(seconds) else None


async def models_entry(client: aiohttp.ClientSession, deployment: Deployment) -> dict | None:
    """The deployment's model as its server's `GET /models` lists it; None when it lists none (or the route is missing).

    One try, no retries: it only sharpens the response cache's key, and its absence is an answer too.
    """
    url = deployment.base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {deployment.api_key}"} if deployment.api_key else {}
    try:
        check_literal(url, outbound_policy())
        async with client.get(url, headers=headers, allow_redirects=False, timeout=aiohttp.ClientTimeout(total=10)) as response:
            if response.status != 200:
                return None
            chunks, size = [], 0
            async for chunk in response.content.iter_chunked(65536):
                size += len(chunk)
                if size > MODELS_BODY_LIMIT:
                    return None
                chunks.append(chunk)
            body = orjson.loads(b"".join(chunks))
        return next((entry for entry in body["data"] if isinstance(entry, dict) and entry.get("id") == deployment.model), None)
    except (Refused, TimeoutError, aiohttp.ClientError, orjson.JSONDecodeError, KeyError, TypeError):
        return None


def completion_of(raw: bytes, deployment, latency_ms: float | None) -> Completion:
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
    fingerprint = body.get("system_fingerprint")
    return Completion(
        text or "", latency_ms, usage.get("prompt_tokens"), usage.get("completion_tokens"), tool_calls, fingerprint if isinstance(fingerprint, str) else None
    )


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
