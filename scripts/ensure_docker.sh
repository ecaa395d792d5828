#!/usr/bin/env bash
# Make sure a Docker engine answers, installing Debian's docker.io, mmdebstrap
# (for the sandbox image), runsc (gVisor) and procps (pgrep, pkill) when
# needed, and registering runsc as the engine's `runsc` runtime.
# The engine runs without a bridge: sandboxes use network none (egress goes
# through the proxy's unix socket, mounted in), or host in development.
set -euo pipefail
log=/var/log/belvedir-dockerd.log
config=/etc/docker/daemon.json
# shellcheck source=scripts/packages.sh
. "$(dirname "$0")/packages.sh"
need dockerd docker.io
need mmdebstrap mmdebstrap
need runsc runsc
need pgrep procps
install_missing
# gVisor on an engine without a bridge: its own netstack is off (the sandbox
# has network none anyway) and host unix sockets may be opened, which is how
# the egress proxy's socket reaches the sandbox. runsc-build is the same kernel
# holding the root filesystem in the sandbox's memory: image builds write their
# whole root there (belvedir/sandbox/images.py), never onto the host's disk.
# Runtimes are merged into an existing daemon.json, whose other keys stay.
if ! grep -q '"runsc-build"' "$config" 2>/dev/null; then
  mkdir -p /etc/docker
  python3 - "$config" <<'PY'
import json, sys
path = sys.argv[1]
try:
    with open(path) as f:
        config = json.load(f)
except FileNotFoundError:
    config = {}
runtimes = config.setdefault("runtimes", {})
runtimes.setdefault("runsc", {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=open"]})
runtimes["runsc-build"] = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--overlay2=root:memory"]}
with open(path + ".new", "w") as f:
    json.dump(config, f, indent=2)
PY
  mv "$config.new" "$config"
  # A running engine reloads its runtimes on SIGHUP, without stopping containers.
  pkill -HUP -x dockerd || true
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
  # A session of its own: the engine outlives the shell, test or CI job that
  # started it (tests/test_faults.py restarts it mid-suite), whose process
  # group may be killed when that job ends.
  setsid nohup dockerd --bridge=none --iptables=false >"$log" 2>&1 </dev/null &
fi
for _ in $(seq 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "The Docker engine did not start. Last lines of $log:" >&2
tail -n 20 "$log" >&2
exit 1
