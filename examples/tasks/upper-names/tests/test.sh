#!/usr/bin/env bash
# The verifier: writes 1 to reward.txt when names_upper.txt holds the trimmed, upper-cased names in order, else 0.
# TASK_ROOT and VERIFIER_DIR default to the sandbox's paths; the repository's tests point them at a temporary folder.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"

check() {
    printf 'ADA LOVELACE\nGRACE HOPPER\nALAN TURING\nKATHERINE JOHNSON\n' | cmp -s - "$ROOT/names_upper.txt"
}

if check; then echo 1 >"$OUT/reward.txt"; else echo 0 >"$OUT/reward.txt"; fi
