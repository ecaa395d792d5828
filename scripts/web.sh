#!/usr/bin/env bash
# The web server `make run` starts: gunicorn with gunicorn.conf.py, as in
# production. Django's runserver (wsgiref) cannot read chunked request
# bodies, which OpenTelemetry's JavaScript exporters send.
set -euo pipefail
cd "$(dirname "$0")/.."
# Development mode, as scripts/run.sh sets it (DEBUG is off unless set).
export DEBUG=${DEBUG:-1}
exec .venv/bin/python -m gunicorn belvedir.wsgi
