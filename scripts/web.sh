#!/usr/bin/env bash
# The web server `make run` starts: gunicorn with gunicorn.conf.py, as in
# production. Django's runserver (wsgiref) cannot read chunked request
# bodies, which OpenTelemetry's JavaScript exporters send.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m gunicorn belvedir.wsgi
