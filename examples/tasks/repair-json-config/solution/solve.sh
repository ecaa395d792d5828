#!/usr/bin/env bash
# The reference solution. TASK_ROOT defaults to the sandbox's /app.
set -eu
ROOT="${TASK_ROOT:-/app}"
printf '{\n  "name": "inventory",\n  "port": 8080,\n  "debug": false\n}\n' >"$ROOT/config.json"
