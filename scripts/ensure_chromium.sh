#!/usr/bin/env bash
# Debian's Chromium for the browser tests (Playwright drives it; no browser download).
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  echo "Installing chromium from Debian…"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
