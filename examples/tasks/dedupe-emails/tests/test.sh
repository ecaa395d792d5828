#!/usr/bin/env bash
# The verifier: writes 1 to reward.txt when unique.txt holds the four addresses, lower-cased and sorted, else 0.
# TASK_ROOT and VERIFIER_DIR default to the sandbox's paths; the repository's tests point them at a temporary folder.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"

check() {
    printf 'alice@example.com\nbob@example.com\ncarol@example.com\ndave@example.com\n' | cmp -s - "$ROOT/unique.txt"
}

if check; then echo 1 >"$OUT/reward.txt"; else echo 0 >"$OUT/reward.txt"; fi
