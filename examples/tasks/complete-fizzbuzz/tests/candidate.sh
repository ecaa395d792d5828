#!/usr/bin/env bash
# Runs the agent's code, as the agent's user, before the verifier (Belvedir's candidate phase): its answers go to
# $CANDIDATE_DIR as data, and the verifier, which never imports the agent's code, compares them.
# TASK_ROOT and CANDIDATE_DIR default to the sandbox's paths; the repository's tests point them at a temporary folder.
set -u
ROOT="${TASK_ROOT:-/app}"
OUT="${CANDIDATE_DIR:-/logs/candidate}"
mkdir -p "$OUT"
cd "$ROOT" && timeout 20 python3 -c '
import json, sys
sys.path.insert(0, ".")
from fizz import fizzbuzz
print(json.dumps([fizzbuzz(n) for n in range(1, 31)]))
' > "$OUT/answers.json"
