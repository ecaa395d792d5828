#!/usr/bin/env bash
# Make sure PostgreSQL answers on 127.0.0.1:5432, installing Debian's server
# and starting its cluster when none does.
set -euo pipefail
ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
if command -v pg_isready >/dev/null && ready; then
  exit 0
fi
# shellcheck source=scripts/packages.sh
. "$(dirname "$0")/packages.sh"
need pg_ctlcluster postgresql
install_missing
version=$(find /etc/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n 1)
pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
for _ in $(seq 30); do
  if ready; then
    # A fresh Debian cluster asks for a password over TCP: give the tests one.
    su postgres -c "psql -qc \"ALTER USER postgres PASSWORD 'postgres'\"" >/dev/null 2>&1 || true
    exit 0
  fi
  sleep 1
done
echo "PostgreSQL did not start on 127.0.0.1:5432." >&2
exit 1
