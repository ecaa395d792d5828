#!/usr/bin/env bash
# The documentation site (var/docs-site/, served at /docs/), built again only when docs/ or mkdocs.yml changed since
# its last build, so that a second `make run` does not spend its seconds on it. `make test` always builds it (strict).
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=var/docs-site.built-from
digest=$(find docs mkdocs.yml -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [ -f var/docs-site/index.html ] && [ "$(cat "$stamp" 2>/dev/null)" = "$digest" ]; then
  exit 0
fi
.venv/bin/mkdocs build --strict --quiet
echo "$digest" > "$stamp"
