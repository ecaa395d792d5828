#!/usr/bin/env bash
# The verifier: writes 1 to reward.txt when both files hold exactly the asked lines, else 0.
# TASK_ROOT and VERIFIER_DIR default to the sandbox's paths; the repository's tests point them at a temporary folder.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"

check() {
    [ "$(cat "$ROOT/greeting.txt" 2>/dev/null)" = "hello, belvedir" ] || return 1
    printf 'write tests\nrun them\nship\n' | cmp -s - "$ROOT/notes/todo.txt"
}

if check; then echo 1 >"$OUT/reward.txt"; else echo 0 >"$OUT/reward.txt"; fi
