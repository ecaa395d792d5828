#!/usr/bin/env bash
# `make run`: set up and run the whole platform on embedded defaults
# (SQLite under var/, the ORM broker), web server and worker together.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh requirements.txt
scripts/ensure_docker.sh
export DEBUG=${DEBUG:-1}
py=.venv/bin/python
$py manage.py migrate --noinput
$py manage.py build_sandbox_image
$py manage.py demo_setup
# Runs a previous worker left behind end (refunded) before a new worker starts.
$py manage.py reap_runs
bind=${BIND:-127.0.0.1:8000}
# Ctrl-C (or either process dying) stops both.
trap 'trap - EXIT INT TERM; kill 0 2>/dev/null' EXIT INT TERM
$py manage.py qcluster &
$py manage.py runserver --noreload "$bind" &
echo "Belvedir is on http://$bind/ (Ctrl-C stops the server and the worker)."
wait -n
