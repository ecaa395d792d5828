#!/usr/bin/env bash
# Create .venv and install a requirements file into it, skipping the install
# when that file has not changed since the last one.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=${1:-requirements.txt}
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=".venv/.installed-$(basename "$requirements")"
digest=$(cat "$requirements" requirements.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check -r "$requirements"
  echo "$digest" > "$stamp"
fi
