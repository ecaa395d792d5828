#!/usr/bin/env bash
# The verifier: writes 1 to reward.txt when start is mode 755 and secret.txt mode 600 with its text unchanged, as
# tests/candidate.sh read them as the agent's user, else 0.
# VERIFIER_DIR and CANDIDATE_DIR default to the sandbox's paths; the repository's tests point them elsewhere.
set -u
OUT="${VERIFIER_DIR:-/logs/verifier}"
REPORT="${CANDIDATE_DIR:-/logs/candidate}/report.txt"
mkdir -p "$OUT"

check() {
    [ "$(cat "$REPORT" 2>/dev/null)" = "$(printf '755\n600\ntoken=not-a-real-one')" ]
}

if check; then echo 1 >"$OUT/reward.txt"; else echo 0 >"$OUT/reward.txt"; fi
