#!/usr/bin/env bash
# Proof that the setup scripts need nothing a fresh Debian machine lacks: in
# a minimal bookworm root (mmdebstrap --variant=minbase: no python3, gcc,
# git or procps), a clean `git archive` of HEAD (or REV) runs `scripts/venv.sh
# requirements.txt`, which must install what it uses, create the venv and
# compile the trace ingest modules; a second run must make no apt call.
# It takes minutes, so `make test` does not run it. Run it as root:
#   scripts/check_fresh_machine.sh [REV [PACKAGE,...]]
# PACKAGEs are ones the machine already has: a Debian standard install has
# python3, without venv (python3-venv) or C headers (python3-dev).
# The root carries this machine's own access to Debian and PyPI (apt
# sources and settings, pip settings, CA certificates, proxy variables): that
# is the machine's configuration, not the project's. It is built under /tmp
# and removed, with its image, on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=$(git rev-parse --short "${1:-HEAD}")
include=${2:-}
scripts/ensure_docker.sh
work=$(mktemp -d /tmp/belvedir-fresh-machine.XXXXXX)
root=$work/root
tag=belvedir-fresh-machine:$$
trap 'docker rmi -f "$tag" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

echo "Building a minbase Debian bookworm root${include:+ with $include} in $root…"
SECONDS=0
mmdebstrap --quiet --variant=minbase ${include:+"--include=$include"} bookworm "$root" http://deb.debian.org/debian
echo "  built in ${SECONDS}s"

# This machine's apt sources and the apt settings no package installed.
rm -f "$root/etc/apt/sources.list"
for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -s "$file" ] && cp "$file" "$root$file"
done
for file in /etc/apt/apt.conf.d/*; do
  dpkg -S "$file" >/dev/null 2>&1 || cp "$file" "$root/etc/apt/apt.conf.d/"
done
# Its CA certificates: the local ones, which Debian's ca-certificates adds to
# the bundle it writes when a package pulls it in, and the bundle itself,
# which pip and Python read before then.
cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$root/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
fi
# Its pip settings, and the variables pip, Python and the proxies read.
pip_config=(/etc/pip.conf /etc/xdg/pip "$HOME/.pip" "$HOME/.config/pip")
settings=()
for path in "${pip_config[@]}"; do
  [ -e "$path" ] || continue
  inside=$root${path/#"$HOME"//root}
  mkdir -p "$(dirname "$inside")"
  cp -r "$path" "$inside"
  settings+=("$(find "$path" -type f -exec cat {} +)")
done
run_args=(--rm -i --network host)
while IFS= read -r name; do
  run_args+=(-e "$name")
  settings+=("${!name}")
done < <(compgen -e | grep -E '^(PIP_[A-Z_]+|[A-Z_]*(CA_BUNDLE|CA_CERTS|CAINFO)|SSL_CERT_(FILE|DIR)|(https?|no|all)_proxy|(HTTPS?|NO|ALL)_PROXY)$' || true)
# The local wheel directories and indexes those settings name, read-only
# (what they name under /etc was copied in above). A local index's pages
# link to files beside its simple/ directory.
while IFS= read -r path; do
  path=${path%/simple}
  [[ $path == /etc/* || ! -e $path ]] || run_args+=(-v "$path:$path:ro")
done < <(printf '%s\n' "${settings[@]}" | grep -oE '(file://)?/[^[:space:],;"]+' | sed -E 's|^file://||; s|/+$||' | sort -u)

tar -C "$root" -c . | docker import - "$tag" >/dev/null
echo "Running scripts/venv.sh requirements.txt on a clean git archive of $rev…"
git archive --format=tar --prefix=belvedir/ "$rev" | docker run "${run_args[@]}" "$tag" bash -euo pipefail -c '
tar -x -C /root
cd /root/belvedir
echo "  python3: $(command -v python3 || echo none); gcc: $(command -v gcc || echo none); git: $(command -v git || echo none); pgrep: $(command -v pgrep || echo none)"
SECONDS=0
scripts/venv.sh requirements.txt
echo "  first run: ${SECONDS}s; python3 is now $(command -v python3) ($(python3 -V))"
ls traces/*.so | sed "s/^/  /"
DJANGO_SETTINGS_MODULE=belvedir.settings .venv/bin/python - <<PY
import importlib, sys
import django
django.setup()
from traces import compiled
modules = {name: importlib.import_module(f"traces.{name}").__file__ for name in compiled.MODULES}
# The app starts on a stale, missing or broken build too (its source runs): say why none should be.
reasons = compiled.plain()
plain = [name for name, path in modules.items() if not path.endswith(".so")]
print(f"  compiled modules current: {not reasons} ({reasons}); imported as plain Python: {plain}")
sys.exit(1 if reasons or plain else 0)
PY
# With everything present, a second run must not reach apt at all.
mkdir -p /tmp/no-apt
for tool in apt-get apt-cache apt dpkg; do
  printf "#!/bin/sh\necho \"$tool \$*: called with everything installed\" >&2\nexit 1\n" >/tmp/no-apt/$tool
  chmod +x /tmp/no-apt/$tool
done
SECONDS=0
PATH=/tmp/no-apt:$PATH scripts/venv.sh requirements.txt
echo "  second run: ${SECONDS}s, no apt call"
'
echo "A fresh Debian bookworm machine gets its venv and the compiled trace ingest modules."
