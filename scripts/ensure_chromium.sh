#!/usr/bin/env bash
# Debian's Chromium for the browser tests (Playwright drives it; no browser download).
set -euo pipefail
# shellcheck source=scripts/packages.sh
. "$(dirname "$0")/packages.sh"
need /usr/bin/chromium chromium
install_missing
