#!/bin/sh
set -eu
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check "mini-swe-agent==2.4.6" "sb-cli==0.1.5"
