#!/bin/sh
set -eu
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check "terminal-bench==0.2.18"
