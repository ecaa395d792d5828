import asyncio
import time

from billing.actions import debt_gate, refuse_if_in_debt

from .client import RequestFailed, complete, http_session


@debt_gate("one tiny request to a deployment (its tokens)")
def try_connection(deployment) -> dict:
    """test_connection from synchronous code, refused while the deployment's project is in debt (InsufficientBalance)."""
    refuse_if_in_debt(deployment.project)
    return asyncio.run(test_connection(deployment))


async def test_connection(deployment) -> dict:
    """One tiny request: did the endpoint answer, how fast, with what."""
    started = time.monotonic()
    async with http_session(1) as client:
        try:
            reply = await complete(client, deployment, [{"role": "user", "content": "Reply with OK."}], {"max_tokens": 5, "temperature": 0})
        except RequestFailed as exc:
            return {"ok": False, "error": str(exc), "latency_ms": round((time.monotonic() - started) * 1000)}
    return {"ok": True, "reply": reply.text[:200], "latency_ms": round(reply.latency_ms)}
