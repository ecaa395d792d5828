#!/bin/sh
# vLLM only where there is a GPU to serve with (the GPU path); lm-eval's API backends either way.
set -eu
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check "lm-eval[api]==0.4.13"
if [ -n "${MODEL:-}" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check "vllm==0.33.0"
fi
