#!/usr/bin/env bash
# Installs every Debian package the build and the tests need. Idempotent: installs only what is
# missing, so a second run is fast and needs no network.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  nlohmann-json3-dev libfmt-dev libspdlog-dev libpcre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  qt6-base-dev qt6-httpserver-dev libqt6charts6-dev libqt6sql6-sqlite
  nodejs npm python3
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi
