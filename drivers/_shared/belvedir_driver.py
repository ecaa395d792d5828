"""What every Belvedir driver shares, standard library only (it runs before any pip install).

The platform copies this file to the root of each driver repository it serves.

- `Tracer`: spans posted as OTLP/HTTP JSON to {FRACTAL_BASE_URL}/api/v1/traces
  with Bearer FRACTAL_API_KEY, every span under session FRACTAL_RUN_ID, model
  calls with gen_ai.prompt.N.* / gen_ai.completion.N.* attributes.
- `TracingRelay`: a relay on 127.0.0.1 for an upstream tool's model calls. The
  tool is pointed at it instead of the provider; each call is forwarded
  (through HTTP(S)_PROXY when set, as urllib does by default) and traced.
- `read_tasks`, `run_check`, `write_results`, `limit`: the rest of the contract.
"""

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FLUSH_BATCH = 200
MAX_ATTRIBUTE_CHARS = 32 * 1024
CHECK_SEPARATOR = " :: "
LLM_PATHS = ("/chat/completions", "/completions", "/messages")


def limit(default=None):
    """BELVEDIR_LIMIT: how many tasks to run (the cheap subset); `default` when unset."""
    value = os.environ.get("BELVEDIR_LIMIT", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else default


def read_tasks(path=None):
    """The Tasks field: one task a line, optionally `task :: check command`. Returns [(task, check)]."""
    path = path or os.environ.get("FRACTAL_TASKS_FILE")
    if not path or not os.path.exists(path):
        return []
    tasks = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            task, _, check = line.partition(CHECK_SEPARATOR)
            tasks.append((task.strip(), check.strip() or None))
    n = limit()
    return tasks[:n] if n else tasks


def run_check(command, cwd, timeout=120, env=None):
    """A task's check command: (passed, output tail)."""
    try:
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"check timed out after {timeout} s"
    return done.returncode == 0, (done.stdout + done.stderr)[-2000:]


def write_results(results, path="results.json"):
    """results.json as the contract says: numeric `score`, counts, `model`."""
    if not isinstance(results.get("score"), (int, float)):
        raise ValueError("results need a numeric score")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2)


def _value(value):
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if not isinstance(value, str):
        value = json.dumps(value)
    return {"stringValue": value[:MAX_ATTRIBUTE_CHARS]}


def message_attributes(side, messages):
    """gen_ai.prompt.N.* or gen_ai.completion.N.*: role, content, and any other field as JSON."""
    attributes = {}
    for index, message in enumerate(messages):
        for key, value in message.items():
            if value is None:
                continue
            if key == "content" and not isinstance(value, str):
                value = json.dumps(value)
            attributes[f"gen_ai.{side}.{index}.{key}"] = value
    return attributes


class Tracer:
    """Spans for one run, buffered and posted as OTLP/HTTP JSON; `flush()` before exiting."""

    def __init__(self, service="belvedir-driver", base_url=None, api_key=None, session_id=None, attempts=4):
        self.base_url = (base_url or os.environ.get("FRACTAL_BASE_URL", "")).rstrip("/")
        self.api_key = api_key or os.environ.get("FRACTAL_API_KEY", "")
        self.session_id = session_id or os.environ.get("FRACTAL_RUN_ID", "")
        self.service = service
        self.attempts = attempts
        self.sent = 0
        self.failed = 0
        self._spans = []
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def enabled(self):
        return bool(self.base_url and self.api_key and self.session_id)

    def _parent(self):
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else None

    @contextmanager
    def span(self, name, kind="task", **attributes):
        """A span around a block; spans started inside it (same thread) are its children."""
        parent = self._parent()
        trace_id = parent[0] if parent else secrets.token_hex(16)
        span_id = secrets.token_hex(8)
        self._local.stack = getattr(self._local, "stack", []) + [(trace_id, span_id)]
        start = time.time_ns()
        extra = {}
        try:
            yield extra
        finally:
            self._local.stack = self._local.stack[:-1]
            self.record(name, kind, start, time.time_ns(), {**attributes, **extra}, trace_id=trace_id, span_id=span_id, parent=parent)

    def workflow(self, name, workflow_name, **attributes):
        """One task of the run: the segmenter makes each workflow span (and what is under it) one task."""
        return self.span(name, kind="workflow", **{"traceloop.workflow.name": workflow_name, "traceloop.entity.name": workflow_name, **attributes})

    def llm_call(self, *, model, prompt, completion, start_ns, end_ns, usage=None, system="openai", error=None):
        """One model call: the messages sent and the messages received."""
        attributes = {
            "gen_ai.system": system,
            "gen_ai.request.model": model,
            **message_attributes("prompt", prompt),
            **message_attributes("completion", completion),
        }
        for key, value in (usage or {}).items():
            attributes[f"gen_ai.usage.{key}"] = value
        if error:
            attributes["error.message"] = str(error)[:2000]
        parent = self._parent()
        self.record(f"{system}.chat", "llm", start_ns, end_ns, attributes, parent=parent, error=bool(error))

    def record(self, name, kind, start_ns, end_ns, attributes, trace_id=None, span_id=None, parent=None, error=False):
        attributes = {"session.id": self.session_id, "traceloop.span.kind": kind, **attributes}
        span = {
            "traceId": trace_id or (parent[0] if parent else secrets.token_hex(16)),
            "spanId": span_id or secrets.token_hex(8),
            "name": name,
            "kind": 3 if kind == "llm" else 1,
            "startTimeUnixNano": str(start_ns),
            "endTimeUnixNano": str(max(end_ns, start_ns)),
            "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
            "status": {"code": 2 if error else 0},
        }
        if parent:
            span["parentSpanId"] = parent[1]
        with self._lock:
            self._spans.append(span)
            full = len(self._spans) >= FLUSH_BATCH
        if full:
            self.flush()

    def flush(self):
        """Send what is buffered. A tracing outage is reported, never fatal to the run."""
        with self._lock:
            spans, self._spans = self._spans, []
        if not spans or not self.enabled:
            return True
        ok = True
        for start in range(0, len(spans), FLUSH_BATCH):
            batch = spans[start : start + FLUSH_BATCH]
            body = {
                "resourceSpans": [
                    {
                        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": self.service}}]},
                        "scopeSpans": [{"scope": {"name": "belvedir_driver"}, "spans": batch}],
                    }
                ]
            }
            request = urllib.request.Request(
                f"{self.base_url}/api/v1/traces",
                data=json.dumps(body).encode(),
                method="POST",
                headers={"Authorization": f"Bearer {self.api_key}", "Content-Type": "application/json"},
            )
            if _post_with_retries(request, self.attempts):
                self.sent += len(batch)
            else:
                self.failed += len(batch)
                ok = False
        return ok


def _post_with_retries(request, attempts):
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return 200 <= response.status < 300
        except urllib.error.HTTPError as exc:
            if exc.code not in (429, 502, 503, 504):
                print(f"[belvedir] trace upload refused: HTTP {exc.code}", file=sys.stderr)
                return False
        except (urllib.error.URLError, OSError) as exc:
            if attempt == attempts - 1:
                print(f"[belvedir] trace upload failed: {exc}", file=sys.stderr)
        if attempt < attempts - 1:
            time.sleep(2**attempt)
    return False


class TracingRelay:
    """A local OpenAI/Anthropic-compatible relay that traces every model call passing through it.

    with TracingRelay(tracer, "https://api.openai.com/v1") as relay:
        env["OPENAI_BASE_URL"] = relay.url   # the upstream tool now calls the relay
    """

    def __init__(self, tracer, upstream, timeout=600):
        self.tracer = tracer
        self.upstream = upstream.rstrip("/")
        self.timeout = timeout
        # A provider is reached through HTTP(S)_PROXY when set (urllib's default); a server on
        # loopback (vLLM in the sandbox) never is.
        loopback = urllib.parse.urlparse(self.upstream).hostname in ("127.0.0.1", "localhost", "::1")
        self._opener = _no_proxy_opener() if loopback else urllib.request.build_opener()
        self.calls = 0
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                relay._forward(self, None)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                relay._forward(self, self.rfile.read(length))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    def _forward(self, handler, body):
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in {"host", "content-length", "connection", "accept-encoding"}}
        request = urllib.request.Request(self.upstream + handler.path, data=body, headers=headers, method=handler.command)
        start = time.time_ns()
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                status, reply_headers, reply = response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            status, reply_headers, reply = exc.code, dict(exc.headers), exc.read()
        except (urllib.error.URLError, OSError) as exc:
            status, reply_headers, reply = 502, {"Content-Type": "application/json"}, json.dumps({"error": {"message": f"relay: {exc}"}}).encode()
        end = time.time_ns()
        if body and handler.path.split("?")[0].endswith(LLM_PATHS):
            self.calls += 1
            self._trace(handler.path, body, status, reply, start, end)
        handler.send_response(status)
        for key, value in reply_headers.items():
            if key.lower() not in {"transfer-encoding", "content-length", "connection", "content-encoding"}:
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(reply)))
        handler.end_headers()
        handler.wfile.write(reply)

    def _trace(self, path, body, status, reply, start, end):
        try:
            request = json.loads(body)
        except ValueError:
            request = {}
        system = "anthropic" if path.split("?")[0].endswith("/messages") else "openai"
        prompt = list(request.get("messages") or [])
        if isinstance(request.get("system"), str):
            prompt.insert(0, {"role": "system", "content": request["system"]})
        if "prompt" in request and not prompt:
            prompt = [{"role": "user", "content": request["prompt"]}]
        completion, usage = parse_reply(reply, system)
        error = None if 200 <= status < 300 else f"HTTP {status}: {reply[:500].decode('utf-8', 'replace')}"
        self.tracer.llm_call(
            model=request.get("model", ""), prompt=prompt, completion=completion, start_ns=start, end_ns=end, usage=usage, system=system, error=error
        )


def parse_reply(reply, system):
    """The completion messages and token usage of a provider reply (plain JSON or an SSE stream)."""
    text = reply.decode("utf-8", "replace")
    if text.lstrip().startswith("data:") or text.lstrip().startswith("event:"):
        return _parse_stream(text, system)
    try:
        data = json.loads(text)
    except ValueError:
        return [], {}
    if system == "anthropic":
        content = "".join(b.get("text", "") for b in data.get("content") or [] if b.get("type") == "text")
        tools = [b for b in data.get("content") or [] if b.get("type") == "tool_use"]
        message = {"role": "assistant", "content": content}
        if tools:
            message["tool_calls"] = tools
        usage = data.get("usage") or {}
        return [message], {"input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens")}
    messages = []
    for choice in data.get("choices") or []:
        message = dict(choice.get("message") or {"role": "assistant", "content": choice.get("text", "")})
        message.setdefault("role", "assistant")
        messages.append(message)
    usage = data.get("usage") or {}
    return messages, {"prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens")}


def _parse_stream(text, system):
    parts, usage = [], {}
    for line in text.splitlines():
        if not line.startswith("data:") or line.strip() == "data: [DONE]":
            continue
        try:
            event = json.loads(line[5:])
        except ValueError:
            continue
        if system == "anthropic":
            parts.append((event.get("delta") or {}).get("text", ""))
            usage.update(
                {k: v for k, v in (event.get("usage") or (event.get("message") or {}).get("usage") or {}).items() if k in ("input_tokens", "output_tokens")}
            )
        else:
            for choice in event.get("choices") or []:
                parts.append((choice.get("delta") or {}).get("content") or "")
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if k in ("prompt_tokens", "completion_tokens")})
    return [{"role": "assistant", "content": "".join(parts)}], usage


def model_env(relay_url, model):
    """Environment pointing litellm-style tools at the relay: Anthropic for anthropic/* models, else OpenAI."""
    key = os.environ.get("LLM_API_KEY", "")
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1", "localhost"]))
    # The relay is on loopback: calls to it must not go out through the egress proxy.
    env = {**os.environ, "NO_PROXY": no_proxy, "no_proxy": no_proxy}
    if model.startswith("anthropic/") or model.startswith("claude"):
        env.update(ANTHROPIC_BASE_URL=relay_url, ANTHROPIC_API_BASE=relay_url, ANTHROPIC_API_KEY=key or env.get("ANTHROPIC_API_KEY", ""))
    else:
        env.update(OPENAI_BASE_URL=relay_url, OPENAI_API_BASE=relay_url, OPENAI_API_KEY=key or env.get("OPENAI_API_KEY", ""))
    return env


def upstream_url(model):
    """The provider behind the relay: LLM_BASE_URL, else the provider the model name implies."""
    if os.environ.get("LLM_BASE_URL"):
        return os.environ["LLM_BASE_URL"]
    return "https://api.anthropic.com" if model.startswith(("anthropic/", "claude")) else "https://api.openai.com/v1"


def require_env(*names):
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        sys.exit(f"[belvedir] set {', '.join(missing)} in the harness's env vars (see README.md)")


def run_traced(tracer, command, model, upstream=None, env=None, cwd=None, stdin=None):
    """Run an upstream tool with its model calls going through a TracingRelay; return its exit code."""
    with TracingRelay(tracer, upstream or upstream_url(model)) as relay:
        full_env = {**model_env(relay.url, model), **(env or {})}
        if callable(command):  # a command that names the relay itself (e.g. a base_url argument)
            command = command(relay.url)
        print("[belvedir] $ " + " ".join(command), flush=True)
        done = subprocess.run(command, env=full_env, cwd=cwd, input=stdin, text=True if stdin is not None else None)
        print(f"[belvedir] {relay.calls} model call(s) traced", flush=True)
        return done.returncode


def finish(tracer, results, upstream_code=0):
    """Write results.json, flush traces, and exit non-zero when the upstream tool or tracing failed."""
    write_results(results)
    flushed = tracer.flush()
    print(f"[belvedir] score {results['score']}; {tracer.sent} span(s) sent", flush=True)
    if upstream_code:
        sys.exit(f"[belvedir] the upstream tool exited with code {upstream_code}")
    if not flushed:
        sys.exit("[belvedir] traces could not be delivered")


def newest(pattern, root="."):
    """The most recently written file matching a glob under `root` (upstream tools name outputs by time)."""
    from pathlib import Path

    found = sorted(Path(root).glob(pattern), key=lambda p: p.stat().st_mtime)
    if not found:
        sys.exit(f"[belvedir] the upstream tool wrote no {pattern} under {root}")
    return found[-1]


SERVED_NAME = "candidate"


class VLLMServer:
    """vLLM serving MODEL (plus the LoRA adapter at ADAPTER_URL) on 127.0.0.1, for GPU runs.

    The model answers to the name `candidate` either way, so the tools behind it need not know
    whether an adapter is loaded.
    """

    def __init__(self, model, adapter_url="", port=None, vllm=".venv/bin/vllm", ready_seconds=1800):
        port = port or int(os.environ.get("VLLM_PORT", "8000"))
        self.model, self.adapter_url, self.port, self.vllm, self.ready_seconds = model, adapter_url, port, vllm, ready_seconds
        self.url = f"http://127.0.0.1:{port}/v1"
        self.process = None

    def __enter__(self):
        command = [self.vllm, "serve", self.model, "--host", "127.0.0.1", "--port", str(self.port)]
        if self.adapter_url:
            command += ["--served-model-name", "base", "--enable-lora", "--lora-modules", f"{SERVED_NAME}={self._fetch_adapter()}"]
        else:
            command += ["--served-model-name", SERVED_NAME]
        print("[belvedir] $ " + " ".join(command), flush=True)
        self.process = subprocess.Popen(command)
        deadline = time.monotonic() + self.ready_seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                sys.exit(f"[belvedir] vLLM exited with code {self.process.returncode} before serving")
            try:
                with _no_proxy_opener().open(f"{self.url}/models", timeout=5):
                    return self
            except OSError:
                time.sleep(5)
        self.process.kill()
        sys.exit(f"[belvedir] vLLM did not serve {self.model} within {self.ready_seconds} s")

    def __exit__(self, *exc):
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def _fetch_adapter(self):
        names = fetch_adapter(self.adapter_url)
        configs = [os.path.dirname(n) for n in names if n.endswith("adapter_config.json")]
        return os.path.abspath(os.path.join("adapter", min(configs, key=len) if configs else ""))


def fetch_adapter(url, folder="adapter"):
    """The adapter zip from its signed URL (ADAPTER_URL), unpacked into `folder`; its member names."""
    import io
    import zipfile

    with urllib.request.urlopen(url, timeout=600) as response:
        archive = zipfile.ZipFile(io.BytesIO(response.read()))
    archive.extractall(folder)
    return archive.namelist()


def _no_proxy_opener():
    # vLLM is on loopback: never through the egress proxy.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))
