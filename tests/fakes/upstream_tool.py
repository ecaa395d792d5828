"""Stands in for an upstream benchmark tool (tb, inspect, lm_eval, mini-extra, openclaw…) in driver tests.

It does what matters to a driver: one model call through the base URL the driver gave it
(OPENAI_BASE_URL, the driver's tracing relay, when there is one), then the tool's recorded output where the tool
writes it (FAKE_OUTPUTS: {"sample path": "destination"}) or on stdout (FAKE_STDOUT).
"""

import json
import os
import shutil
import sys
import urllib.request

if os.environ.get("OPENAI_BASE_URL"):  # tools that call no model (sb-cli) are run without a relay
    body = {"model": os.environ.get("LLM_MODEL", "m"), "messages": [{"role": "user", "content": "fake upstream: " + " ".join(sys.argv[1:3])}]}
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    urllib.request.urlopen(request, timeout=10).read()
for source, destination in json.loads(os.environ.get("FAKE_OUTPUTS", "{}")).items():
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    (shutil.copytree if os.path.isdir(source) else shutil.copy)(source, destination)
if os.environ.get("FAKE_STDOUT"):
    sys.stdout.write(open(os.environ["FAKE_STDOUT"]).read())
