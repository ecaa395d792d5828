#!/usr/bin/env bash
# The reference solution. TASK_ROOT defaults to the sandbox's /app.
set -eu
ROOT="${TASK_ROOT:-/app}"
mkdir -p "$ROOT/notes"
echo "hello, belvedir" >"$ROOT/greeting.txt"
printf 'write tests\nrun them\nship\n' >"$ROOT/notes/todo.txt"
