"""Record OpenLLMetry's indexed message attributes (`gen_ai.prompt.N.*`) from a real client.

python tests/clients/record_ollama.py FILE

traceloop-sdk 0.62's `ollama` instrumentation still writes the indexed
generation (its `openai` one moved on); it drives the official `ollama`
client here against a small fake Ollama server on 127.0.0.1: a question, a
tool call, the tool's result, an answer. The spans go to FILE as OTLP/JSON
(tests/fixtures/spans/ollama_0_62.json). Not run by the test suite.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ollama import Client
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from traceloop.sdk import Traceloop
from traceloop_agent import _otlp_json

TOOL_CALL = {"function": {"name": "get_weather", "arguments": {"city": "Lisbon"}}}


class FakeOllama(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        last = request["messages"][-1]
        message = (
            {"role": "assistant", "content": "It is sunny in Lisbon."}
            if last["role"] == "tool"
            else {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]}
        )
        body = json.dumps(
            {
                "model": request["model"],
                "created_at": "2026-11-30T12:00:00Z",
                "message": message,
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 12 * len(request["messages"]),
                "eval_count": 8,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOllama)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    exporter = InMemorySpanExporter()
    Traceloop.init(app_name="ollama-agent", disable_batch=True, telemetry_enabled=False, exporter=exporter)
    Traceloop.set_association_properties({"session_id": "ollama-session", "user_id": "ollama-user"})
    client = Client(host=f"http://127.0.0.1:{server.server_address[1]}")
    messages = [{"role": "system", "content": "You answer weather questions."}, {"role": "user", "content": "What is the weather in Lisbon?"}]
    first = client.chat(
        model="llama3.2", messages=messages, tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    )
    messages += [first.message.model_dump(exclude_none=True), {"role": "tool", "content": "Sunny, 24 °C", "tool_name": "get_weather"}]
    client.chat(model="llama3.2", messages=messages)
    server.shutdown()
    with open(sys.argv[1], "w") as out:
        json.dump([_otlp_json(s) for s in exporter.get_finished_spans()], out, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
