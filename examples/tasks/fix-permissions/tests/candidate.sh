#!/usr/bin/env bash
# Reads the two files as the agent's user, before the verifier (Belvedir's candidate phase): secret.txt is to be the
# agent's alone (mode 600), which the verifier, a user of its own, cannot read. Their modes and the secret's text go
# to $CANDIDATE_DIR as data for the verifier.
# TASK_ROOT and CANDIDATE_DIR default to the sandbox's paths; the repository's tests point them at a temporary folder.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${CANDIDATE_DIR:-/logs/candidate}"
mkdir -p "$OUT"
# find's %m, not `stat -c %a`: coreutils' stat (and ls -l) call statx, which the platform's gVisor
# (runsc 20221219) answers with EINVAL.
{
    find "$ROOT/start" -maxdepth 0 -printf '%m\n'
    find "$ROOT/secret.txt" -maxdepth 0 -printf '%m\n'
    cat "$ROOT/secret.txt"
} >"$OUT/report.txt" 2>/dev/null
