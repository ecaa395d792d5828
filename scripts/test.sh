#!/usr/bin/env bash
# `make test`: install and start what the tests need, then run the whole
# suite against PostgreSQL (a fresh test database) and the real Docker engine.
#
# `scripts/test.sh --fast` (`make test-fast`): the fast tier, for every edit.
# Only PostgreSQL; the tests that need none of Docker, Redis, Chromium, a
# server or a process of the platform's own (their markers, pytest.ini), with
# every sandbox host on the fake backend. Docker is pointed nowhere, so a test
# that needs it and is not marked fails instead of quietly using it.
#
# Each setup step prints its time ("setup: …"), so the whole command's budget
# (12 minutes on a fresh 2-core machine, installs included) is watched as it is spent.
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
step() {
  local name=$1 begun=$SECONDS
  shift
  "$@"
  echo "setup: $name took $((SECONDS - begun)) s"
}
# Markers of the tests that need more than PostgreSQL (pytest.ini).
heavy="docker or processes or browser or redis or faults"

# shellcheck source=scripts/packages.sh
. scripts/packages.sh
# Every Debian package the setup needs, in one apt call: on a fresh machine
# that is one package-list read and one dpkg run instead of one per script,
# and no two scripts below wait on each other's apt lock.
need git git
need openssl openssl
need gcc gcc libc6-dev
if [ "$fast" = 0 ]; then
  need dockerd docker.io
  need mmdebstrap mmdebstrap
  need runsc runsc
  need pgrep procps
  need /usr/bin/chromium chromium
  need npm nodejs npm
fi
step "Debian packages" install_missing

if [ "$fast" = 1 ]; then
  step "Python packages" scripts/venv.sh requirements-dev.txt
  step "benchmark data" .venv/bin/python manage.py install_benchmark_data
  # The local model's weights: tests/test_adapters.py checks real adapters against them in-process.
  step "local model" .venv/bin/python manage.py install_local_model
  scripts/ensure_postgres.sh
  export DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}
  # Style first: a formatting or lint error fails in seconds, not after the suite.
  .venv/bin/ruff format --check .
  .venv/bin/ruff check .
  # The documentation site: a broken link or a page out of its navigation fails here (mkdocs.yml: strict).
  .venv/bin/mkdocs build --strict --quiet
  export BELVEDIR_TEST_SANDBOX_BACKEND=fake DOCKER_HOST=unix:///nonexistent/the-fast-tier-has-no-docker.sock
  status=0
  # One worker per core (pytest-xdist), each on its own test database; an idle
  # worker takes tests queued for the other (a few run for seconds).
  .venv/bin/python -m pytest -n auto --dist worksteal -m "not ($heavy)" "$@" || status=$?
  echo "The fast tier took $((SECONDS - started)) s, setup included."
  exit "$status"
fi

# Services the package steps below never need; first, so that no two apt calls race.
step "PostgreSQL and Redis" bash -c "scripts/ensure_postgres.sh && scripts/ensure_redis.sh"
export DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}
# The Python packages (downloads, then CPU) and the services and JavaScript
# packages (the engine's start, npm's downloads) need nothing of each other.
step "Python packages" scripts/venv.sh requirements-dev.txt &
python_packages=$!
{
  step "Docker engine" scripts/ensure_docker.sh
  step "JavaScript packages" scripts/ensure_node_packages.sh
} &
services=$!
wait "$python_packages"
wait "$services"
# Both need the venv. The image (mmdebstrap, ~45 s on a fresh machine) is needed by the real
# parts only: it builds while the data downloads and the in-process tests run.
step "sandbox image" .venv/bin/python manage.py build_sandbox_image &
image=$!
step "benchmark data" .venv/bin/python manage.py install_benchmark_data
# The local model server's weights, for tests/test_local_model.py (a no-op once installed).
step "local model" .venv/bin/python manage.py install_local_model
echo "setup: all but the sandbox image took $((SECONDS - started)) s"
# Style first: a formatting or lint error fails in seconds, not after the suite.
.venv/bin/ruff format --check .
.venv/bin/ruff check .
# The documentation site: a broken link or a page out of its navigation fails here (mkdocs.yml: strict).
.venv/bin/mkdocs build --strict --quiet
# Three runs that split the suite by marker, every test in exactly one:
# 1. the in-process tests (the fast tier's, less those marked sandbox, which
#    run on Docker here): one pytest-xdist worker per core, as in the fast
#    tier, where they are proven to run side by side;
# 2. the tests of the real parts, one worker per core and one more, each
#    taking whole files (--dist loadfile: a module's server or second engine
#    is started once). Each worker has its own test database, live server,
#    egress proxy and sandbox instance label (tests/conftest.py), so none sees,
#    reaps or sweeps another's containers. They wait on sandboxes, servers and
#    browsers more than they compute: on 2 cores, 2 workers took 578 s where 1
#    took 860 s (12-04), and 3 workers 1,264 s where 2 took 1,446-1,508 s (12-07);
# 3. the faults tests alone: they stop PostgreSQL and Docker engines under
#    everything else.
# An extra argument such as -k may select no test of a run (pytest's exit 5); it fails only if it selects none of any.
# All always run, so one failure in the first hides nothing of the others.
in_process=0
real_parts=0
faults=0
.venv/bin/python -m pytest -n auto --dist worksteal -m "not ($heavy or sandbox)" "$@" || in_process=$?
wait "$image"
echo "setup: the sandbox image was ready $((SECONDS - started)) s after the start"
.venv/bin/python -m pytest -n "$(($(nproc) + 1))" --dist loadfile -m "($heavy or sandbox) and not faults" "$@" || real_parts=$?
.venv/bin/python -m pytest -m faults "$@" || faults=$?
echo "make test took $((SECONDS - started)) s, setup included."
if [ "$in_process" = 5 ] && [ "$real_parts" = 5 ] && [ "$faults" = 5 ]; then
  exit 5
fi
for status in "$in_process" "$real_parts" "$faults"; do
  if [ "$status" != 0 ] && [ "$status" != 5 ]; then
    exit "$status"
  fi
done
