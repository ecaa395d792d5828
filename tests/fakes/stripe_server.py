"""A small fake of Stripe's HTTP API on 127.0.0.1, for the official library.

It answers Checkout Session creation like Stripe does (form-encoded request,
JSON response) and records every request so tests can assert on what the
library actually sent.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl


class FakeStripe:
    def __init__(self):
        self.requests: list[dict] = []
        self.sessions: dict[str, dict] = {}
        self._by_idempotency_key: dict[str, dict] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                form = dict(parse_qsl(body))
                fake.requests.append({"path": self.path, "form": form, "headers": dict(self.headers)})
                if self.path != "/v1/checkout/sessions":
                    return self._reply(404, {"error": {"type": "invalid_request_error", "message": "Unknown path"}})
                key = self.headers.get("Idempotency-Key")
                if key in fake._by_idempotency_key:
                    return self._reply(200, fake._by_idempotency_key[key])
                session_id = f"cs_test_{len(fake.sessions) + 1:06d}"
                session = {
                    "id": session_id,
                    "object": "checkout.session",
                    "url": f"https://checkout.stripe.test/pay/{session_id}",
                    "mode": form.get("mode"),
                    "amount_total": int(form.get("line_items[0][price_data][unit_amount]", 0)),
                    "currency": form.get("line_items[0][price_data][currency]"),
                    "client_reference_id": form.get("client_reference_id"),
                    "payment_status": "unpaid",
                }
                fake.sessions[session_id] = session
                if key:
                    fake._by_idempotency_key[key] = session
                self._reply(200, session)

            def _reply(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
