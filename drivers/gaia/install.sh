#!/bin/sh
set -eu
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check "inspect-ai==0.3.285" "inspect-evals==0.26.0" "openai" "anthropic"
