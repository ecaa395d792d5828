#!/usr/bin/env bash
# The JavaScript OTLP exporters tests/test_trace_clients.py runs, installed
# from the npm registry at the versions tests/js/package-lock.json pins,
# skipping the install when the lockfile has not changed since the last one.
set -euo pipefail
cd "$(dirname "$0")/../tests/js"
if ! command -v npm >/dev/null; then
  apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
stamp=node_modules/.installed-lock
digest=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  echo "$digest" > "$stamp"
fi
