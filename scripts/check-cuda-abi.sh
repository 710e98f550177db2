#!/usr/bin/env bash
# The CUDA backend's one ABI (docs/CUDA.md "One ABI"): the fatbin is compiled once, on Linux, and
# loaded by Linux and Windows hosts alike, so device-side interfaces -- the kernels (*.cu), the
# device headers (*.cuh) and the headers they share with the host (engine/cuda/*.h) -- use
# fixed-width types only. `long` / `unsigned long` are 64-bit on Linux and 32-bit on Windows:
# this check fails on any of them there (`long long` is 64-bit on both and allowed).
#   check-cuda-abi.sh ROOT        check ROOT/engine/cuda
#   check-cuda-abi.sh --self-test prove the check catches a `long` and passes clean code
set -euo pipefail
scan() {  # scan FILE...: prints offending lines as file:line: text; comments are ignored
  perl -ne '
    s{//.*}{};
    if (/(?<![\w])(?:unsigned\s+|signed\s+)?long(?!\s+long)(?!\s*double)\b/ && !/long\s+long/) {
      print "$ARGV:$.: $_";
    } elsif (/\blong\s+long\b.*(?<!long\s)\blong\b(?!\s+long)/) {
      print "$ARGV:$.: $_";
    }
    close ARGV if eof;' "$@"
}
if [ "${1:-}" = "--self-test" ]; then
  d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
  printf 'extern "C" __global__ void k(long n, float* y);\n' > "$d/bad.cu"
  printf 'struct S { unsigned long bytes; };\n' > "$d/bad2.h"
  printf '// a long comment\nextern "C" __global__ void k(long long n, std::uint64_t m);\n' > "$d/good.cu"
  [ -n "$(scan "$d/bad.cu")" ] || { echo "self-test: missed long"; exit 1; }
  [ -n "$(scan "$d/bad2.h")" ] || { echo "self-test: missed unsigned long"; exit 1; }
  [ -z "$(scan "$d/good.cu")" ] || { echo "self-test: flagged clean code"; exit 1; }
  echo "check-cuda-abi self-test passed"
  exit 0
fi
root=${1:?usage: check-cuda-abi.sh ROOT | --self-test}
mapfile -t files < <(ls "$root"/engine/cuda/*.cu "$root"/engine/cuda/*.cuh "$root"/engine/cuda/*.h)
bad=$(scan "${files[@]}")
if [ -n "$bad" ]; then
  echo "long / unsigned long in device-side interfaces (use std::int64_t, std::uint64_t, int):"
  echo "$bad"
  exit 1
fi
echo "check-cuda-abi: ${#files[@]} files, fixed-width types only"
