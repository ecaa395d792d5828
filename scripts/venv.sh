#!/usr/bin/env bash
# Create .venv and install a requirements file into it, skipping the install
# when that file has not changed since the last one.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=${1:-requirements.txt}
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  # The belvedir SDK's dependency tree needs a current resolver (pip 23 fails on it).
  .venv/bin/pip install --quiet --disable-pip-version-check --upgrade pip 2> >(grep -v "^WARNING: Location" >&2)
fi
stamp=".venv/.installed-$(basename "$requirements")"
digest=$(cat "$requirements" requirements.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check -r "$requirements" 2> >(grep -v "^WARNING: Location" >&2)
  echo "$digest" > "$stamp"
fi
# The trace ingest's per-span modules, compiled (scripts/compile.py): a no-op when current.
.venv/bin/python scripts/compile.py
