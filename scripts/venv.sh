#!/usr/bin/env bash
# Create .venv and install a requirements file into it, skipping the install
# when that file has not changed since the last one.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/packages.sh
. scripts/packages.sh
requirements=${1:-requirements.txt}
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
need "$python" python3 python3-venv python3-dev
# scripts/compile.py builds C extensions: gcc only recommends the C library's headers.
need gcc gcc libc6-dev
if command -v "$python" >/dev/null; then
  # Debian's python3 has venv (ensurepip) and its C headers in packages of
  # their own; other builds (pyenv's) carry both, and apt could not add them.
  mapfile -t -O ${#missing_packages[@]} missing_packages < <("$python" - <<'PY'
import os, sys, sysconfig
if sys.base_prefix == "/usr":
    try:
        import ensurepip  # noqa: F401
    except ImportError:
        print("python3-venv")
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        print("python3-dev")
PY
  )
fi
install_missing
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  # The belvedir SDK's dependency tree needs a current resolver (pip 23 fails on it).
  .venv/bin/pip install --quiet --disable-pip-version-check --upgrade pip 2> >(grep -v "^WARNING: Location" >&2)
fi
stamp=".venv/.installed-$(basename "$requirements")"
digest=$(cat "$requirements" requirements.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
  # --no-compile: Python compiles what it imports when it first does, not all 16,000 modules at install.
  .venv/bin/pip install --quiet --disable-pip-version-check --no-compile -r "$requirements" 2> >(grep -v "^WARNING: Location" >&2)
  echo "$digest" > "$stamp"
fi
# The trace ingest's per-span modules, compiled (scripts/compile.py): a no-op when current.
.venv/bin/python scripts/compile.py
