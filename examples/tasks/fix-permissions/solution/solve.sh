#!/usr/bin/env bash
# The reference solution. TASK_ROOT defaults to the sandbox's /app.
set -eu
ROOT="${TASK_ROOT:-/app}"
chmod 755 "$ROOT/start"
chmod 600 "$ROOT/secret.txt"
