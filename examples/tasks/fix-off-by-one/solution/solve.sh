#!/usr/bin/env bash
# The reference solution. TASK_ROOT defaults to the sandbox's /app.
set -eu
ROOT="${TASK_ROOT:-/app}"
sed -i 's/range(1, n))/range(1, n + 1))/' "$ROOT/mathutil.py"
