#!/usr/bin/env bash
# The reference solution. TASK_ROOT defaults to the sandbox's /app.
set -eu
ROOT="${TASK_ROOT:-/app}"
sed -e 's/^ *//' -e 's/ *$//' "$ROOT/names.txt" | tr '[:lower:]' '[:upper:]' >"$ROOT/names_upper.txt"
