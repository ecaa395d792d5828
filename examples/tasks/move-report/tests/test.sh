#!/usr/bin/env bash
# The verifier: writes 1 to reward.txt when the report is at reports/2026-q4.txt, unchanged, and gone from its old path, else 0.
# TASK_ROOT and VERIFIER_DIR default to the sandbox's paths; the repository's tests point them at a temporary folder.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"

check() {
    [ ! -e "$ROOT/report_final_v2.txt" ] || return 1
    [ "$(cat "$ROOT/reports/2026-q4.txt" 2>/dev/null)" = "Q4: revenue up, costs flat." ]
}

if check; then echo 1 >"$OUT/reward.txt"; else echo 0 >"$OUT/reward.txt"; fi
