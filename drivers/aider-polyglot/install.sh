#!/bin/sh
# aider's benchmark script lives in its repository, not in the aider-chat package: both pinned.
set -eu
AIDER_TAG=v0.86.2
POLYGLOT_COMMIT=7e0611e77b54e2dea774cdc0aa00cf9f7ed6144f
mkdir -p upstream
git clone --quiet --depth 1 --branch "$AIDER_TAG" https://github.com/Aider-AI/aider upstream/aider
git clone --quiet https://github.com/Aider-AI/polyglot-benchmark upstream/aider/tmp.benchmarks/polyglot-benchmark
git -C upstream/aider/tmp.benchmarks/polyglot-benchmark checkout --quiet "$POLYGLOT_COMMIT"
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check "aider-chat==0.86.2" -r upstream/aider/requirements/requirements-dev.txt
