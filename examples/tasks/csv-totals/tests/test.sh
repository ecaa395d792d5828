#!/usr/bin/env bash
# The verifier: writes 1 to reward.txt when totals.csv holds each region's total, sorted, else 0.
# TASK_ROOT and VERIFIER_DIR default to the sandbox's paths; the repository's tests point them at a temporary folder.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"

check() {
    printf 'region,total\neast,4\nnorth,17\nsouth,25\n' | cmp -s - "$ROOT/totals.csv"
}

if check; then echo 1 >"$OUT/reward.txt"; else echo 0 >"$OUT/reward.txt"; fi
