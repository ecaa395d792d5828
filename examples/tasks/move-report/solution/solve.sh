#!/usr/bin/env bash
# The reference solution. TASK_ROOT defaults to the sandbox's /app.
set -eu
ROOT="${TASK_ROOT:-/app}"
mkdir -p "$ROOT/reports"
mv "$ROOT/report_final_v2.txt" "$ROOT/reports/2026-q4.txt"
