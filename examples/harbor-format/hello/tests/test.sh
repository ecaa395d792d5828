#!/usr/bin/env bash
# The verifier, as Harbor runs one: a score between 0 and 1 in /logs/verifier/reward.txt.
# GREETING comes from [verifier.env]; TASK_ROOT and VERIFIER_DIR let the repository's tests run it outside a sandbox.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
mkdir -p "$OUT"
if [ "$(cat "$ROOT/hello.txt" 2>/dev/null)" = "${GREETING:-Hello, world!}" ]; then
    echo 1 >"$OUT/reward.txt"
else
    echo 0 >"$OUT/reward.txt"
fi
