"""A fake OpenAI-compatible server on 127.0.0.1 for eval tests and benches.

Answers /chat/completions and /completions from a script (a function of the
last user message), with optional latency, and 429 or 500 answers on demand.
It records every request and the peak number of requests in flight.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


class FakeOpenAI:
    def __init__(self, answer=lambda text: "42", latency: float = 0.0):
        self.answer = answer
        self.latency = latency
        self.fail_statuses: dict[str, list[int]] = {}  # prompt text -> statuses to answer first
        self.always_fail: dict[str, int] = {}
        self.requests: list[dict] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake._lock:
                    fake.in_flight += 1
                    fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
                    fake.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                try:
                    if fake.latency:
                        time.sleep(fake.latency)
                    text = body["messages"][-1]["content"] if "messages" in body else body.get("prompt", "")
                    with fake._lock:
                        queued = fake.fail_statuses.get(text)
                        status = queued.pop(0) if queued else fake.always_fail.get(text)
                    if status:
                        return self._reply(status, {"error": {"message": "scripted failure"}})
                    content = fake.answer(text)
                    choice = {"index": 0, "finish_reason": "stop"}
                    if self.path.endswith("/chat/completions"):
                        choice["message"] = {"role": "assistant", "content": content}
                    else:
                        choice["text"] = content
                    self._reply(200, {"id": "cmpl-1", "object": "chat.completion", "model": body.get("model"), "choices": [choice],
                                      "usage": {"prompt_tokens": len(text.split()), "completion_tokens": len(content.split())}})
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

            def _reply(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
