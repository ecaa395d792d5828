"""The OpenAI-compatible HTTP server: /v1/models, /v1/chat/completions, /v1/completions (aiohttp).

llama.cpp's context is not thread-safe, so the model runs in one thread
and requests take turns: each waits in a bounded asyncio queue, and a
request finding it full is answered 429 with Retry-After at once rather
than left waiting for minutes. The thread sends each event (prompt
evaluated, text, finish) back to the request's handler on the event loop;
a handler whose client has gone cancels its request, queued or running.
"""

import asyncio
import json
import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

from . import errors, params, tools
from .errors import APIError
from .runtime import Delta, Finish, Prompt, Runtime, Token

logger = logging.getLogger(__name__)

MAX_BODY = 1 << 20
# What a client is told to wait when the queue is full: about one request's time at this model's speed.
RETRY_AFTER_SECONDS = 1
_END = object()


class Job:
    """One request's work for the model thread, and the events it sends back."""

    def __init__(self, loop: asyncio.AbstractEventLoop, produce: Callable[[Runtime, Callable[[], bool]], Iterator], prompt_param: str, *, stream: bool):
        self._loop, self._produce, self.prompt_param, self._stream = loop, produce, prompt_param, stream
        self._events: asyncio.Queue = asyncio.Queue()
        self.cancelled = threading.Event()

    def run(self, runtime: Runtime):
        """In the model thread."""
        # A request answered in one piece gets its text in one event: waking the event loop
        # for every token took a core's time slice from llama.cpp's threads on a busy machine.
        held: list[Delta] = []
        try:
            for event in self._produce(runtime, self.cancelled.is_set):
                if isinstance(event, Delta) and not self._stream:
                    held.append(event)
                    continue
                if held:
                    self._send(Delta("".join(delta.text for delta in held), tuple(token for delta in held for token in delta.tokens)))
                    held = []
                self._send(event)
        except Exception as exc:  # the handler turns it into the client's error
            self._send(exc)
        finally:
            self._send(_END)

    def _send(self, event):
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)
        except RuntimeError:  # the loop closed at shutdown: nobody is waiting
            pass

    async def next(self) -> Prompt | Delta | Finish:
        event = await self._events.get()
        if isinstance(event, Exception):
            error = errors.from_runtime(event, self.prompt_param)
            if error.status >= 500:
                logger.error("generation failed", exc_info=event)
            raise error
        if event is _END:
            raise APIError(500, "The model stopped without finishing the request.", type="server_error")
        return event


class ModelThread:
    def __init__(self, runtime: Runtime, queue_size: int):
        self.runtime = runtime
        self.queue: asyncio.Queue[Job] = asyncio.Queue(queue_size)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="localmodel")

    def submit(self, produce, prompt_param: str, *, stream: bool) -> Job:
        job = Job(asyncio.get_running_loop(), produce, prompt_param, stream=stream)
        try:
            self.queue.put_nowait(job)
        except asyncio.QueueFull:
            raise errors.busy(self.queue.qsize(), RETRY_AFTER_SECONDS) from None
        return job

    async def serve(self):
        loop = asyncio.get_running_loop()
        while True:
            job = await self.queue.get()
            if not job.cancelled.is_set():
                await loop.run_in_executor(self._executor, job.run, self.runtime)

    def close(self):
        self._executor.shutdown(wait=True)


@web.middleware
async def openai_errors(request: web.Request, handler):
    """The one place errors become responses, in OpenAI's shape (unknown paths and methods too)."""
    try:
        return await handler(request)
    except APIError as exc:
        return web.json_response(exc.body(), status=exc.status, headers=exc.headers)
    except web.HTTPRequestEntityTooLarge:
        exc = errors.too_large(MAX_BODY)
        return web.json_response(exc.body(), status=exc.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        body = APIError(exc.status, f"{exc.reason}: {request.method} {request.path}", code=str(exc.status)).body()
        return web.json_response(body, status=exc.status, headers={k: v for k, v in exc.headers.items() if k == "Allow"})


def build_app(runtime: Runtime, model_id: str, *, adapter_id: str = "", queue_size: int = 64) -> web.Application:
    """`adapter_id`: the name the runtime's LoRA adapter is served under, beside the base model under `model_id` (as vLLM's --lora-modules)."""
    # client_max_size bounds request.read(), chunked bodies included; Content-Length over it is refused unread.
    app = web.Application(middlewares=[openai_errors], client_max_size=MAX_BODY)
    model = ModelThread(runtime, queue_size)
    app["model"], app["model_ids"], app["adapter_id"] = model, (model_id, adapter_id) if adapter_id else (model_id,), adapter_id

    async def start_model_thread(app):
        task = asyncio.create_task(model.serve())
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(None, model.close)

    app.cleanup_ctx.append(start_model_thread)
    app.router.add_get("/v1/models", list_models)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/completions", completions)
    return app


async def list_models(request: web.Request) -> web.Response:
    data = [{"id": model_id, "object": "model", "created": 0, "owned_by": "belvedir"} for model_id in request.app["model_ids"]]
    return web.json_response({"object": "list", "data": data})


async def _body(request: web.Request) -> dict:
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise errors.too_large(MAX_BODY)
    return params.decode(await request.read())


async def chat_completions(request: web.Request) -> web.StreamResponse:
    chat = params.chat(await _body(request), request.app["model_ids"])
    adapter = chat.model == request.app["adapter_id"]

    def produce(runtime: Runtime, cancelled):
        return runtime.generate(runtime.tokenize(runtime.chat_prompt(list(chat.messages))), chat.sampling, adapter=adapter, cancelled=cancelled)

    job = request.app["model"].submit(produce, "messages", stream=chat.stream)
    try:
        prompt = await job.next()
        reply = _Reply(chat.model, "chatcmpl", "chat.completion", len(prompt.tokens))
        if chat.stream:
            return await _stream(request, _chat_chunks(job, reply, chat))
        text, tokens, finish = await _collect(job)
        message, reason = {"role": "assistant", "content": text}, finish.reason
        if chat.tool_names:
            content, calls = tools.parse(text, chat.tool_names)
            if calls:
                message, reason = {"role": "assistant", "content": content, "tool_calls": [call.as_openai() for call in calls]}, "tool_calls"
        choice = {
            "index": 0,
            "message": message,
            "logprobs": {"content": _chat_logprobs(tokens, chat.sampling.logprobs)} if chat.logprobs else None,
            "finish_reason": reason,
        }
        return web.json_response(reply.body([choice], finish))
    finally:
        job.cancelled.set()


async def completions(request: web.Request) -> web.StreamResponse:
    completion = params.completion(await _body(request), request.app["model_ids"])
    logprobs = completion.sampling.logprobs
    adapter = completion.model == request.app["adapter_id"]

    def produce(runtime: Runtime, cancelled):
        prompt_logprobs = logprobs if completion.echo and logprobs is not None else None
        tokens = runtime.tokenize(completion.prompt)
        return runtime.generate(tokens, completion.sampling, prompt_logprobs=prompt_logprobs, logprob_end=True, adapter=adapter, cancelled=cancelled)

    job = request.app["model"].submit(produce, "prompt", stream=completion.stream)
    try:
        prompt = await job.next()
        reply = _Reply(completion.model, "cmpl", "text_completion", len(prompt.tokens))
        # Offsets count from the prompt's start, echoed or not, as OpenAI's legacy completions do.
        legacy = _LegacyLogprobs(0 if completion.echo else len(completion.prompt)) if logprobs is not None else None
        echoed = completion.prompt if completion.echo else ""
        echoed_tokens = prompt.tokens if completion.echo else ()
        if completion.stream:
            return await _stream(request, _completion_chunks(job, reply, completion, legacy, echoed, echoed_tokens))
        text, tokens, finish = await _collect(job)
        choice = {
            "text": echoed + text,
            "index": 0,
            "logprobs": legacy.add(echoed_tokens + tokens) if legacy else None,
            "finish_reason": finish.reason,
        }
        return web.json_response(reply.body([choice], finish))
    finally:
        job.cancelled.set()


class _Reply:
    """What every response and chunk of one request shares."""

    def __init__(self, model: str, prefix: str, kind: str, prompt_tokens: int):
        self.id = f"{prefix}-{uuid.uuid4().hex}"
        self.kind, self.model, self.created = kind, model, int(time.time())
        self.prompt_tokens = prompt_tokens

    def body(self, choices: list, finish: Finish | None = None, *, chunk: bool = False) -> dict:
        body = {"id": self.id, "object": self.kind + (".chunk" if chunk and self.kind == "chat.completion" else ""), "created": self.created}
        body |= {"model": self.model, "choices": choices}
        if not chunk:
            body["usage"] = self.usage(finish)
        return body

    def usage(self, finish: Finish) -> dict:
        completion_tokens = finish.completion_tokens
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": self.prompt_tokens + completion_tokens}


async def _collect(job: Job) -> tuple[str, tuple[Token, ...], Finish]:
    texts, tokens = [], []
    while not isinstance(event := await job.next(), Finish):
        texts.append(event.text)
        tokens.extend(event.tokens)
    return "".join(texts), tuple(tokens), event


async def _stream(request: web.Request, chunks) -> web.StreamResponse:
    """Server-sent events, one per chunk, then `[DONE]`; an error once the headers are out is an event too, as OpenAI sends it."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    try:
        try:
            async for body in chunks:
                await _send(response, body)
        except APIError as exc:
            await _send(response, exc.body())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client left: the handler's `finally` cancels its generation
    return response


async def _send(response: web.StreamResponse, body: dict):
    await response.write(b"data: " + json.dumps(body).encode() + b"\n\n")


async def _chat_chunks(job: Job, reply: _Reply, chat: params.ChatRequest):
    def chunk(delta: dict, logprobs=None, finish_reason=None) -> dict:
        return reply.body([{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}], chunk=True)

    yield chunk({"role": "assistant", "content": ""})
    while not isinstance(event := await job.next(), Finish):
        yield chunk({"content": event.text}, {"content": _chat_logprobs(event.tokens, chat.sampling.logprobs)} if chat.logprobs else None)
    yield chunk({}, finish_reason=event.reason)
    if chat.include_usage:
        yield {**reply.body([], chunk=True), "usage": reply.usage(event)}


async def _completion_chunks(job: Job, reply: _Reply, completion: params.CompletionRequest, legacy, echoed: str, echoed_tokens):
    def chunk(text: str, tokens, finish_reason=None) -> dict:
        logprobs = legacy.add(tokens) if legacy else None
        return reply.body([{"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish_reason}], chunk=True)

    if echoed:
        yield chunk(echoed, echoed_tokens)
    while not isinstance(event := await job.next(), Finish):
        yield chunk(event.text, event.tokens)
    yield chunk("", (), event.reason)
    if completion.include_usage:
        yield {**reply.body([], chunk=True), "usage": reply.usage(event)}


class _LegacyLogprobs:
    """The completions API's logprobs: parallel lists, `text_offset` counting characters from `offset`."""

    def __init__(self, offset: int):
        self.offset = offset

    def add(self, tokens) -> dict:
        offsets = []
        for token in tokens:
            offsets.append(self.offset)
            self.offset += len(token.text)
        return {
            "tokens": [token.text for token in tokens],
            "token_logprobs": [token.logprob for token in tokens],
            "top_logprobs": [None if token.top is None else dict(token.top) for token in tokens],
            "text_offset": offsets,
        }


def _chat_logprobs(tokens, top: int) -> list[dict]:
    def entry(text: str, logprob: float) -> dict:
        return {"token": text, "logprob": logprob, "bytes": list(text.encode())}

    # The runtime adds the chosen token to its alternatives, as the completions API shows them; chat's list is the top ones alone.
    return [
        {**entry(token.text, token.logprob), "bytes": list(token.piece), "top_logprobs": [entry(text, logprob) for text, logprob in (token.top or ())[:top]]}
        for token in tokens
    ]


async def serve(runtime: Runtime, model_id: str, *, host: str, port: int, queue_size: int, ready: Callable[[str], None], adapter_id: str = ""):
    """Serve until cancelled."""
    runner = web.AppRunner(build_app(runtime, model_id, adapter_id=adapter_id, queue_size=queue_size), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        ready(f"http://{host}:{port}/v1")
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def serve_until_signalled(runtime: Runtime, model_id: str, **options):
    """`serve` until SIGINT or SIGTERM (both end it cleanly: a supervisor's stop is not an error); OSError if the port is taken."""

    async def main():
        serving = asyncio.create_task(serve(runtime, model_id, **options))
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, serving.cancel)
        try:
            await serving
        except asyncio.CancelledError:
            pass

    asyncio.run(main())
