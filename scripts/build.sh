#!/usr/bin/env bash
# Configures and builds Neural into build/ (Release, ccache, Ninja). Extra arguments go to CMake.
#   NEURAL_BUILD_DIR   build folder (default: build)
#   NEURAL_JOBS        parallel compile jobs (default: number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${NEURAL_BUILD_DIR:-build}
JOBS=${NEURAL_JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/neural-ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
# Paths below the checkout hash as relative ones, so another clone of the tree (CI's) hits the
# same cache entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
elif [ $# -gt 0 ]; then
  cmake "$BUILD_DIR" "$@"
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
