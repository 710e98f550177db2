#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest). GPU tests skip with a reason where there is no GPU.
# Reference data comes from ../shared (override: NEURAL_SHARED_DIR=/path/to/shared).
#   NEURAL_TEST_JOBS   parallel tests (default: number of cores)
#   extra arguments go to ctest (e.g. -R Golden, -L unit)
set -euo pipefail
cd "$(dirname "$0")/.."
# Stage times, printed at the end (CI keeps a full run under 45 minutes: docs/RELIABILITY.md).
stages=()
stage_start=$(date +%s)
stage_done() { local now; now=$(date +%s); stages+=("$1 $((now - stage_start)) s"); stage_start=$now; }
./scripts/setup.sh
stage_done setup
cmake_args=()
[ -n "${NEURAL_SHARED_DIR:-}" ] && cmake_args+=(-DNEURAL_SHARED_DIR="$NEURAL_SHARED_DIR")
# CI builds with warnings as errors (docs/ARCHITECTURE.md "Conventions").
[ -n "${CI:-}" ] && cmake_args+=(-DNEURAL_WERROR=ON)
./scripts/build.sh "${cmake_args[@]}"
BUILD_DIR=${NEURAL_BUILD_DIR:-build}
./scripts/check-build.sh "$BUILD_DIR"
stage_done build
# Several test processes share the cores: idle OpenMP workers should sleep, not spin.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
status=0
ctest --test-dir "$BUILD_DIR" -j "${NEURAL_TEST_JOBS:-$(nproc)}" --output-on-failure "$@" || status=$?
# Skipped tests (e.g. GPU tests on a machine without a GPU) say why.
log="$BUILD_DIR/Testing/Temporary/LastTest.log"
if [ -f "$log" ] && grep -q "Skipped" "$log"; then
  echo "Skip reasons:"
  grep -A1 ": Skipped$" "$log" | grep -v -e ": Skipped$" -e "^--$" | sort | uniq -c | sed 's/^/  /'
fi
# Which CPU kernel variants this machine ran and compared bit for bit (docs/KERNELS.md "Every
# variant the same bits"): a CPU without a feature still checks the variants it has.
if [ -f "$log" ]; then
  echo "CPU kernel variants run here:"
  grep -h -e "variants checked bit for bit" -e "attention variants available" \
    -e "seeded replies compared" -e "kernel variants available here" "$log" | sort -u | sed 's/^/  /' || true
fi
stage_done ctest
# Reliability stages (docs/RELIABILITY.md), on a full run only (no ctest arguments):
#   fuzz smoke: every libFuzzer target NEURAL_FUZZ_SECONDS (default 25) s    off: NEURAL_FUZZ=0
#   ASan + UBSan build running the ctest suite (scripts/sanitize.sh asan)   off: NEURAL_SANITIZE=0
# The ThreadSanitizer pass and longer fuzzing are `scripts/sanitize.sh tsan` / `scripts/fuzz.sh`.
# CI (CI set) keeps inside its time budget: the corpus replays run as ordinary ctests (label fuzz)
# instead of building the libFuzzer targets, and the ASan/UBSan pass covers the engine's unit tests
# (NEURAL_ASAN_SCOPE=unit). Set NEURAL_FUZZ=1 / NEURAL_ASAN_SCOPE=full for the whole thing.
if [ -n "${CI:-}" ]; then
  export NEURAL_FUZZ=${NEURAL_FUZZ:-0} NEURAL_ASAN_SCOPE=${NEURAL_ASAN_SCOPE:-unit}
fi
if [ $# -eq 0 ]; then
  if [ "${NEURAL_FUZZ:-1}" = 0 ]; then
    echo "reliability: libFuzzer smoke skipped (NEURAL_FUZZ=0); the corpora replay and every target gets 10 s of random mutations as ctests (label fuzz: fuzz_replay_*, fuzz_mutate_*)"
  elif ! command -v clang++-14 >/dev/null 2>&1; then
    echo "reliability: fuzz smoke skipped (clang++-14 not installed; scripts/setup.sh installs it)"
  else
    t0=$(date +%s)
    ./scripts/fuzz.sh "${NEURAL_FUZZ_SECONDS:-25}" || status=1
    echo "reliability: fuzz smoke ran (${NEURAL_FUZZ_SECONDS:-25} s per target, $(($(date +%s) - t0)) s in all)"
    stage_done fuzz
  fi
  if [ "${NEURAL_SANITIZE:-1}" = 0 ]; then
    echo "reliability: ASan/UBSan pass skipped (NEURAL_SANITIZE=0)"
  else
    t0=$(date +%s)
    ./scripts/sanitize.sh asan || status=1
    echo "reliability: ASan/UBSan ctest pass ran ($(($(date +%s) - t0)) s)"
    stage_done asan
  fi
fi
# Windows proof: the engine and its unit tests cross-built with mingw-w64 and run under Wine
# (scripts/test-windows.sh). Off with NEURAL_WINDOWS_TESTS=0; skipped when the tools are missing.
if [ "${NEURAL_WINDOWS_TESTS:-1}" != 0 ] && [ $# -eq 0 ]; then
  if command -v x86_64-w64-mingw32-g++-posix >/dev/null 2>&1 &&
     { command -v wine64 >/dev/null 2>&1 || [ -x /usr/lib/wine/wine64 ]; }; then
    ./scripts/test-windows.sh || status=1
    stage_done windows
  else
    echo "test-windows: skipped (mingw-w64 or wine64 not installed; scripts/setup.sh installs them)"
  fi
fi
echo "stage times: ${stages[*]/%/,}" | sed 's/,$//'
exit $status
