"""A fake OpenAI-compatible server on 127.0.0.1 for eval tests and benches.

Answers /chat/completions and /completions from a script (a function of the
last user message; a dict answer is an assistant message of its own, such as
tool calls), with optional latency, and 429/5xx answers on demand.
For agents, `reply` (a function of the whole request body returning the
assistant message, tool calls included) scripts multi-step conversations.
Sandboxes on the egress network reach it only on an address the test proxy
allows: pass `host=OUTSIDE_ADDRESS` (tests/conftest.py) for those.
With `prompt_logprob` (a function of the prompt: each prompt token's
logprob) it answers a /completions request with `echo` as vLLM does: the
prompt's tokens (words with the whitespace before them) after a BOS token,
one generated token, and their logprobs and text offsets; without it, echo
and logprobs are ignored, as by a server that cannot serve them.
With `capacity` set, a request arriving while that many are in flight is
answered 429 at once with `Retry-After: retry_after`, as a gateway in front
of a server of that capacity would; those are counted in `refused`, not
recorded. It records every other request and the peak number in flight. It runs
on its own asyncio loop in a background thread: a thread per connection
would cost the process more than the engine it is measuring.
"""

import asyncio
import itertools
import json
import re
import threading

from aiohttp import web

# vLLM echoes the BOS token first, its text not in the prompt: every offset after it is shifted by its length.
BOS, GENERATED = "<s>", " the"


class FakeOpenAI:
    def __init__(self, answer=lambda text: "42", latency: float = 0.0, reply=None, host: str = "127.0.0.1", prompt_logprob=None):
        self.answer = answer
        self.prompt_logprob = prompt_logprob
        self.host = host
        self.reply = reply
        self.latency = latency
        self.fail_statuses: dict[str, list[int]] = {}  # prompt text -> statuses to answer first
        self.always_fail: dict[str, int] = {}
        self.requests: list[dict] = []
        # What GET /v1/models lists ([{"id": ..., ...}]; None answers 404, as a server without the route does),
        # and the system_fingerprint its completions carry (None: none, as most servers).
        self.models: list[dict] | None = None
        self.system_fingerprint: str | None = None
        # The Server header of its answers (None: aiohttp's own), as an inference server names itself there.
        self.server: str | None = None
        self.in_flight = 0
        self.peak_in_flight = 0
        self.capacity: int | None = None
        self.retry_after = "1"
        self.refused = 0
        # Cleared: requests are received (and recorded) but not answered until it is set again.
        self.answering = threading.Event()
        self.answering.set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.url = ""

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self.capacity is not None and self.in_flight >= self.capacity:
            self.refused += 1
            return web.json_response({"error": {"message": "over capacity"}}, status=429, headers={"Retry-After": self.retry_after})
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        self.requests.append({"path": request.path, "body": body, "auth": request.headers.get("Authorization")})
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
            while not self.answering.is_set():
                await asyncio.sleep(0.01)
            if self.reply is not None:
                message = self.reply(body)
                choice = {"index": 0, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop", "message": message}
                usage = {"prompt_tokens": len(json.dumps(body["messages"]).split()), "completion_tokens": len(json.dumps(message).split())}
                return web.json_response({"id": "cmpl-1", "object": "chat.completion", "model": body.get("model"), "choices": [choice], "usage": usage})
            text = body["messages"][-1]["content"] if "messages" in body else body.get("prompt", "")
            queued = self.fail_statuses.get(text)
            status = queued.pop(0) if queued else self.always_fail.get(text)
            if status:
                return web.json_response({"error": {"message": "scripted failure"}}, status=status)
            if body.get("echo") and body.get("logprobs") is not None and self.prompt_logprob is not None:
                return web.json_response(self._echoed(body))
            content = self.answer(text)
            extra = {"system_fingerprint": self.system_fingerprint} if self.system_fingerprint else {}
            choice = {"index": 0, "finish_reason": "stop"}
            if isinstance(content, dict):
                choice["message"] = {"role": "assistant", "content": None, **content}
                choice["finish_reason"] = "tool_calls" if content.get("tool_calls") else "stop"
                content = content.get("content") or ""
            elif request.path.endswith("/chat/completions"):
                choice["message"] = {"role": "assistant", "content": content}
            else:
                choice["text"] = content
            usage = {"prompt_tokens": len(str(text).split()), "completion_tokens": len(content.split())}
            return web.json_response({"id": "cmpl-1", "object": "chat.completion", "model": body.get("model"), "choices": [choice], "usage": usage, **extra})
        finally:
            self.in_flight -= 1

    async def _models(self, request: web.Request) -> web.Response:
        if self.models is None:
            return web.json_response({"error": {"message": "not found"}}, status=404)
        # "created" changes with every answer, as vLLM's does: no fingerprint may depend on it.
        return web.json_response({"object": "list", "data": [{"object": "model", "created": len(self.requests), **m} for m in self.models]})

    async def _name_server(self, request: web.Request, response: web.StreamResponse):
        if self.server is not None:
            response.headers["Server"] = self.server

    def _echoed(self, body: dict) -> dict:
        prompt = body["prompt"]
        words = re.findall(r"\s*\S+", prompt)
        tokens = [BOS, *words, GENERATED]
        values = [None, *(self.prompt_logprob(prompt) for _ in words), -0.5]
        offsets = list(itertools.accumulate(len(t) for t in tokens[:-1]))
        logprobs = {
            "tokens": tokens,
            "token_logprobs": values,
            "text_offset": [0, *offsets],
            "top_logprobs": [None, *({t: v} for t, v in zip(tokens[1:], values[1:], strict=True))],
        }
        choice = {"index": 0, "text": prompt + GENERATED, "finish_reason": "length", "logprobs": logprobs}
        usage = {"prompt_tokens": len(words) + 1, "completion_tokens": 1}
        return {"id": "cmpl-1", "object": "text_completion", "model": body.get("model"), "choices": [choice], "usage": usage}

    def _serve(self):
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/completions", self._handle)
        app.router.add_get("/v1/models", self._models)
        app.on_response_prepare.append(self._name_server)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, self.host, 0, backlog=1024)
        self._loop.run_until_complete(site.start())
        port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{port}/v1"
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self):
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


if __name__ == "__main__":
    # Standalone, for benches: python -m tests.fakes.openai_server LATENCY [CAPACITY]; prints its URL, and
    # when terminated a JSON line of what it answered.
    import signal
    import sys
    import time

    def answer(question: str) -> str:
        # A judge's prompt gets a rating (MT-Bench's "[[rating]]" format); anything else its last word.
        if "[[rating]]" in question or "[The Start of Assistant" in question or "Assistant A's Conversation" in question:
            return "A fair answer. Rating: [[7]]"
        return question.split()[-1] if question.split() else ""

    with FakeOpenAI(answer=answer, latency=float(sys.argv[1])) as fake:
        fake.capacity = int(sys.argv[2]) if len(sys.argv) > 2 else None
        print(fake.url, flush=True)

        def counts(*_):
            print(json.dumps({"answered": len(fake.requests), "refused": fake.refused, "peak_in_flight": fake.peak_in_flight}), flush=True)
            sys.exit(0)

        signal.signal(signal.SIGTERM, counts)
        while True:
            time.sleep(3600)
