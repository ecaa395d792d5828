#!/usr/bin/env bash
# Make sure Redis answers on 127.0.0.1:6379 (tests/test_many_workers.py runs
# django-q2 on it), installing Debian's server and starting it when none does.
set -euo pipefail
ready() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
if command -v redis-cli >/dev/null && ready; then
  exit 0
fi
# shellcheck source=scripts/packages.sh
. "$(dirname "$0")/packages.sh"
need redis-server redis-server
install_missing
redis-server --bind 127.0.0.1 --port 6379 --daemonize yes >/dev/null
for _ in $(seq 30); do
  if ready; then
    exit 0
  fi
  sleep 1
done
echo "Redis did not start on 127.0.0.1:6379." >&2
exit 1
