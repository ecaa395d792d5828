#!/usr/bin/env bash
# The verifier: writes 1 to reward.txt when start is mode 755 and secret.txt mode 600, contents unchanged, else 0.
# TASK_ROOT and VERIFIER_DIR default to the sandbox's paths; the repository's tests point them at a temporary folder.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"

# find's %m, not `stat -c %a`: coreutils' stat (and ls -l) call statx, which the platform's gVisor
# (runsc 20221219) answers with EINVAL, and the check would fail whatever the modes.
mode() {
    find "$1" -maxdepth 0 -printf '%m'
}

check() {
    [ "$(mode "$ROOT/start")" = 755 ] || return 1
    [ "$(mode "$ROOT/secret.txt")" = 600 ] || return 1
    [ "$(cat "$ROOT/secret.txt")" = "token=not-a-real-one" ]
}

if check; then echo 1 >"$OUT/reward.txt"; else echo 0 >"$OUT/reward.txt"; fi
