#!/usr/bin/env bash
# The JavaScript OTLP exporters tests/test_trace_clients.py runs, installed
# from the npm registry at the versions tests/js/package-lock.json pins,
# skipping the install when the lockfile has not changed since the last one.
set -euo pipefail
# shellcheck source=scripts/packages.sh
. "$(dirname "$0")/packages.sh"
need npm nodejs npm
install_missing
cd "$(dirname "$0")/../tests/js"
stamp=node_modules/.installed-lock
digest=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  echo "$digest" > "$stamp"
fi
