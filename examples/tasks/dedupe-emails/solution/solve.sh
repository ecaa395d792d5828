#!/usr/bin/env bash
# The reference solution. TASK_ROOT defaults to the sandbox's /app.
set -eu
ROOT="${TASK_ROOT:-/app}"
tr '[:upper:]' '[:lower:]' <"$ROOT/emails.txt" | LC_ALL=C sort -u >"$ROOT/unique.txt"
