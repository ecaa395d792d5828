#!/usr/bin/env bash
# The reference solution. TASK_ROOT defaults to the sandbox's /app.
set -eu
ROOT="${TASK_ROOT:-/app}"
awk '$2 == "ERROR"' "$ROOT/server.log" | wc -l | tr -d ' ' >"$ROOT/error_count.txt"
