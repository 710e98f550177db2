#!/usr/bin/env bash
# Fails when the build folder lacks anything its configuration promises (CMake writes the list:
# neural-promised-targets.txt, neural-configuration.txt), so a missing install step or a part
# that was skipped can never pass as a green test run:
#   - every executable and library target of the configuration exists as a file;
#   - with the desktop app configured (gui=ON) the app, the server and their tests are among them
#     and ctest lists GUI tests;
#   - with the CUDA backend configured (cuda=ON) the CUDA tests are registered.
# Usage: scripts/check-build.sh [build-folder]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
list="$BUILD_DIR/neural-promised-targets.txt"
conf="$BUILD_DIR/neural-configuration.txt"
fail() { echo "check-build: $*" >&2; exit 1; }
[ -f "$list" ] && [ -f "$conf" ] || fail "$list or $conf missing: configure $BUILD_DIR with this tree's CMake first"
missing=()
count=0
while IFS= read -r f; do
  [ -n "$f" ] || continue
  count=$((count + 1))
  [ -f "$f" ] || missing+=("$f")
done < "$list"
[ ${#missing[@]} -eq 0 ] || fail "$(printf '%s\n' "not built, although the configuration promises it:" "${missing[@]}")"
gui=$(sed -n 's/^gui=//p' "$conf")
cuda=$(sed -n 's/^cuda=//p' "$conf")
tests=$(sed -n 's/^tests=//p' "$conf")
require_target() { grep -q "/$1\(\.exe\)\?$" "$list" || fail "$1 is not part of this configuration although $2"; }
desktop=$(sed -n 's/^desktop=//p' "$conf")
if [ "$gui" = ON ]; then
  [ "$desktop" = OFF ] || require_target neural-desktop "NEURAL_GUI=ON"
  require_target neural-server "NEURAL_GUI=ON"
fi
if [ "$tests" = ON ]; then
  labels=$(ctest --test-dir "$BUILD_DIR" --print-labels 2>/dev/null || true)
  if [ "$gui" = ON ] && [ "$desktop" != OFF ]; then
    echo "$labels" | grep -qx "  gui" || fail "no GUI tests registered although NEURAL_GUI=ON"
  fi
  if [ "$cuda" = ON ]; then
    echo "$labels" | grep -qx "  gpu" || fail "no GPU tests registered although the CUDA backend is built"
  fi
fi
echo "check-build: $count promised targets built (gui=$gui, cuda=$cuda, tests=$tests)"
