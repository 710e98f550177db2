#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan + UBSan + libFuzzer) into build-fuzz/ and runs each
# for SECONDS (default 60), one after the other, then prints executions, coverage and crashes.
#   scripts/fuzz.sh [SECONDS]
#   scripts/fuzz.sh --build-only   (configure and build, run nothing; scripts/fuzz_bundle.sh uses it)
#   NEURAL_FUZZ_TARGETS  space-separated subset (default: all; names as in tests/fuzz/CMakeLists.txt)
#   NEURAL_FUZZ_BUILD_DIR  build folder (default: build-fuzz)
#   NEURAL_JOBS          compile jobs (default: 2)
# New interesting inputs go to BUILD/fuzz-corpus/<target> (not the repository); crashing inputs
# to BUILD/fuzz-artifacts/<target>/. The seeds in tests/fuzz/corpus/<target> are read only.
# Exit status 1 when any target found a crash. docs/RELIABILITY.md has the recorded runs.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-${NEURAL_FUZZ_SECONDS:-60}}
BUILD_DIR=${NEURAL_FUZZ_BUILD_DIR:-build-fuzz}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/neural-ccache}
CC=${NEURAL_FUZZ_CC:-clang-14}
CXX=${NEURAL_FUZZ_CXX:-clang++-14}
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "fuzz: $CXX not found (scripts/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2
  exit 2
fi
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # -O1 -g without NDEBUG: asserts stay on, stack traces stay readable.
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
    -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -g" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g" \
    -DNEURAL_FUZZ=ON -DNEURAL_CUDA=OFF -DNEURAL_BENCHMARKS=OFF \
    ${NEURAL_SHARED_DIR:+-DNEURAL_SHARED_DIR="$NEURAL_SHARED_DIR"} >/dev/null
fi
nice -n 10 cmake --build "$BUILD_DIR" -j "${NEURAL_JOBS:-2}" --target neural_fuzzers
[ "$SECONDS_EACH" != "--build-only" ] || exit 0

SHARED=${NEURAL_SHARED_DIR:-$(cd .. && pwd)/shared}
export NEURAL_FUZZ_TOKENIZER=${NEURAL_FUZZ_TOKENIZER:-$SHARED/fixtures/tiny-gptoss-a/tokenizer.json}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
TARGETS=${NEURAL_FUZZ_TARGETS:-$(cd tests/fuzz/corpus && ls)}
status=0
summary=()
for t in $TARGETS; do
  bin="$BUILD_DIR/tests/fuzz/fuzz_$t"
  [ -x "$bin" ] || { echo "fuzz: $bin was not built" >&2; status=1; continue; }
  work="$BUILD_DIR/fuzz-corpus/$t"
  art="$BUILD_DIR/fuzz-artifacts/$t"
  mkdir -p "$work" "$art"
  before=$(find "$art" -type f | wc -l)
  log="$BUILD_DIR/fuzz-$t.log"
  echo "fuzz: $t for ${SECONDS_EACH}s"
  # One process, nice'd: the machine is shared. Inputs up to 64 KiB (the store seeds are ~9 KB).
  nice -n 15 "$bin" -max_total_time="$SECONDS_EACH" -print_final_stats=1 -timeout=30 \
    -rss_limit_mb=4096 -max_len=65536 -artifact_prefix="$art/" "$work" "tests/fuzz/corpus/$t" \
    >"$log" 2>&1 || true
  # (a crashed run has no final stats: every grep here may find nothing)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  [ -n "$execs" ] || execs=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -o '^#[0-9]*' | tr -d '#' || true)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' || true)
  ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*' || true)
  after=$(find "$art" -type f | wc -l)
  # Replaying the seeds alone (e.g. a regress-* input of a bug this build predates) can fail
  # before fuzzing starts; that counts too.
  found=$((after - before))
  if grep -q -E 'ERROR: (AddressSanitizer|libFuzzer|UndefinedBehaviorSanitizer)|runtime error:' "$log"; then
    [ "$found" -gt 0 ] || found=1
  fi
  if [ "$found" -gt 0 ]; then
    status=1
    echo "fuzz: $t CRASHED; log $log, inputs in $art:"
    grep -m5 -E 'ERROR|runtime error|SUMMARY|==[0-9]+==' "$log" | sed 's/^/    /' || true
  fi
  summary+=("$(printf '%-18s %6ss  execs %-10s cov %-6s ft %-7s crashes %s' "$t" "$SECONDS_EACH" \
    "${execs:-?}" "${cov:-?}" "${ft:-?}" "$found")")
done
echo "fuzz summary (build $BUILD_DIR):"
printf '  %s\n' "${summary[@]}"
exit $status
