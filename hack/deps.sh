#!/usr/bin/env bash
# Installs the Debian packages the client tests drive (the real sushy and redfishtool) when
# they are missing. Needs root (or sudo); a no-op when everything is there.
set -euo pipefail
PKGS=(python3-sushy redfishtool)
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
