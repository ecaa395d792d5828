#!/usr/bin/env bash
# The verifier: writes 1 to reward.txt when start is mode 755 and secret.txt mode 600, contents unchanged, else 0.
# TASK_ROOT and VERIFIER_DIR default to the sandbox's paths; the repository's tests point them at a temporary folder.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"

check() {
    [ "$(stat -c %a "$ROOT/start")" = 755 ] || return 1
    [ "$(stat -c %a "$ROOT/secret.txt")" = 600 ] || return 1
    [ "$(cat "$ROOT/secret.txt")" = "token=not-a-real-one" ]
}

if check; then echo 1 >"$OUT/reward.txt"; else echo 0 >"$OUT/reward.txt"; fi
