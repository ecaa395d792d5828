#!/usr/bin/env bash
# Make sure a Docker engine answers, installing Debian's docker.io and
# mmdebstrap (for the sandbox image) and starting dockerd when needed.
# The engine runs without a bridge: sandboxes use network none, or host.
set -euo pipefail
log=/var/log/belvedir-dockerd.log
if ! command -v dockerd >/dev/null || ! command -v mmdebstrap >/dev/null; then
  echo "Installing docker.io and mmdebstrap from Debian…"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io mmdebstrap >/dev/null
fi
if docker info >/dev/null 2>&1; then
  exit 0
fi
# An engine that is still starting or shutting down: let it finish first.
for _ in $(seq 60); do
  pgrep -x dockerd >/dev/null || break
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
if ! pgrep -x dockerd >/dev/null; then
  # Left behind by an engine that did not exit cleanly; dockerd refuses to start beside it.
  rm -f /var/run/docker.pid
  echo "Starting the Docker engine (log: $log)…"
  nohup dockerd --bridge=none --iptables=false >"$log" 2>&1 &
fi
for _ in $(seq 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "The Docker engine did not start. Last lines of $log:" >&2
tail -n 20 "$log" >&2
exit 1
