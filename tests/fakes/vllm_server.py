"""Stands in for `vllm serve MODEL --host H --port P …` in driver tests: records its arguments
(and whether the LoRA module it was given holds an adapter), then answers an OpenAI-compatible
API until it is terminated."""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

args = sys.argv[1:]
record = {"argv": args}
if "--lora-modules" in args:
    name, _, path = args[args.index("--lora-modules") + 1].partition("=")
    record["lora"] = {"name": name, "has_adapter_config": os.path.isfile(os.path.join(path, "adapter_config.json"))}
with open(os.environ["FAKE_VLLM_RECORD"], "w") as handle:
    json.dump(record, handle)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _json(self, data):
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._json({"object": "list", "data": [{"id": "candidate", "object": "model"}]})

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._json(
            {
                "id": "x",
                "model": request.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "served"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            }
        )


HTTPServer((args[args.index("--host") + 1], int(args[args.index("--port") + 1])), Handler).serve_forever()
