#!/usr/bin/env bash
# The reference solution: GREETING comes from [solution.env].
set -eu
ROOT="${TASK_ROOT:-/app}"
echo "${GREETING:-Hello, world!}" >"$ROOT/hello.txt"
