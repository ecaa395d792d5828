# shellcheck shell=bash
# Sourced by the setup scripts: Debian packages they use, installed with
# apt-get (as root) only when missing. A machine that has them all makes no
# apt call at all.
#   need COMMAND PACKAGE...  adds the packages when COMMAND is not on PATH
#                            (or, given as a path, not executable);
#   missing_packages+=(PKG)  adds a package the script found missing itself;
#   install_missing          installs them all with one apt-get.

missing_packages=()

need() {
  command -v "$1" >/dev/null || missing_packages+=("${@:2}")
}

install_missing() {
  [ ${#missing_packages[@]} -gt 0 ] || return 0
  if [ "$(id -u)" != 0 ]; then
    echo "${0##*/} needs ${missing_packages[*]}: run it as root, or apt-get install them." >&2
    exit 1
  fi
  echo "Installing ${missing_packages[*]} from Debian…"
  # The package lists are updated only when the install fails on them (a
  # fresh image has none; old ones name files the mirror no longer has), so
  # the setup scripts `make test` runs one after another update them once.
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_packages[@]}" >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_packages[@]}" >/dev/null
  fi
  missing_packages=()
}
