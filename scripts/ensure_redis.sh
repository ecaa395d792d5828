#!/usr/bin/env bash
# Make sure Redis answers on 127.0.0.1:6379 (tests/test_many_workers.py runs
# django-q2 on it), installing Debian's server and starting it when none does.
set -euo pipefail
ready() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
if command -v redis-cli >/dev/null && ready; then
  exit 0
fi
if ! command -v redis-server >/dev/null; then
  echo "Installing Redis from Debian…"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
redis-server --bind 127.0.0.1 --port 6379 --daemonize yes >/dev/null
for _ in $(seq 30); do
  if ready; then
    exit 0
  fi
  sleep 1
done
echo "Redis did not start on 127.0.0.1:6379." >&2
exit 1
