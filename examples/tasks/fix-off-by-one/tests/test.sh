#!/usr/bin/env bash
# The verifier: writes 1 to reward.txt when the answers tests/candidate.sh had total(n) give sum 1..n inclusive, else 0.
# TASK_ROOT, VERIFIER_DIR and CANDIDATE_DIR default to the sandbox's paths; the repository's tests point them elsewhere.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
ANSWERS="${CANDIDATE_DIR:-/logs/candidate}/answers.json"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"

check() {
    python3 "$HERE/check.py" "$ANSWERS" 2>/dev/null
}

if check; then echo 1 >"$OUT/reward.txt"; else echo 0 >"$OUT/reward.txt"; fi
