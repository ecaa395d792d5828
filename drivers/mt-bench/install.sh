#!/bin/sh
# FastChat's llm_judge scripts and MT-Bench questions live in its repository: the v0.2.36 tag.
set -eu
git clone --quiet --depth 1 --branch v0.2.36 https://github.com/lm-sys/FastChat upstream
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e "./upstream[llm_judge]"
if [ -n "${MODEL:-}" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check "vllm==0.33.0"
fi
