#!/bin/sh
# tau-bench is not on PyPI: its repository at a pinned commit, in a virtualenv.
set -eu
TAU_COMMIT=59a200c6d575d595120f1cb70fea53cef0632f6b
git clone --quiet https://github.com/sierra-research/tau-bench upstream
git -C upstream checkout --quiet "$TAU_COMMIT"
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e ./upstream
