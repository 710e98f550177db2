#!/usr/bin/env bash
# The reliability figures of docs/RELIABILITY.md that need the accelerator machine, in one call:
#   build   Neural with CUDA (16 jobs)
#   gpu     the CUDA tests (prompt cancellation on the GPU path among them), their counts
#   bench   decode and prompt speed on the tiny fixture's store (the expert records' checksums
#           are checked on their first read): two runs of the same bench back to back, the
#           first one paying the first touch
# Needs on a machine without the project's Debian packages:
#   NEURAL_DEBS       a folder of .deb files unpacked first (apt-get download of the -dev
#                     packages: nlohmann-json3-dev libfmt-dev libfmt9 libspdlog-dev
#                     libspdlog1.10 libpcre2-dev libpcre2-* libxxhash-dev libxxhash0
#                     libgtest-dev libgmock-dev googletest)
#   NEURAL_FIXTURES   a .tar.gz of ../shared's fixtures/ (the working tree travels without it)
# The fuzz run is its own call: scripts/fuzz_parallel.sh (docs/RELIABILITY.md).
set -uo pipefail
exec > >(tee "${OUT:-/tmp}/accelerator-reliability.log") 2>&1
[ -d "${NEURAL_DEBS:-}" ] && { for f in "$NEURAL_DEBS"/*.deb; do dpkg -x "$f" /; done; ldconfig; }
SHARED=/tmp/neural-shared
if [ -n "${NEURAL_FIXTURES:-}" ]; then mkdir -p "$SHARED" && tar -xzf "$NEURAL_FIXTURES" -C "$SHARED"; fi
echo "== machine"; nproc; grep -m1 "model name" /proc/cpuinfo
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== build"; t0=$(date +%s)
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEURAL_GUI=OFF -DNEURAL_CUDA=ON \
  -DNEURAL_BENCHMARKS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DNEURAL_SHARED_DIR="$SHARED" \
  > /tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
ninja -C /tmp/b -j16 neural neural_cuda_tests > /tmp/build.log 2>&1 ||
  { grep -E "error|FAILED" /tmp/build.log | head -30; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
echo "== gpu tests"
/tmp/b/tests/cuda/neural_cuda_tests 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|tests? ran" | head -40
echo "== bench: tiny fixture, raw store, cuda backend"
M=$SHARED/fixtures/tiny-gptoss-a
/tmp/b/engine/cli/neural repack --checkpoint "$M" --out /tmp/tiny.nstore --format raw 2>&1 | tail -1
bench() {  # bench NAME MODEL STORE extra-flags...: decode and prompt, 3 runs in one process
  local name=$1 model=$2 store=$3 w; shift 3
  for w in decode prompt; do
    /tmp/b/engine/cli/neural bench --model "$model" --store "$store" --workload "$w" --repeat 3 \
      --json "/tmp/bench-$name-$w.json" "$@" > "/tmp/bench-$name-$w.log" 2>&1 ||
      tail -5 "/tmp/bench-$name-$w.log"
    python3 - "$w" "$name" "/tmp/bench-$name-$w.json" <<'PY'
import json, sys
w, run, path = sys.argv[1:4]
try:
    r = json.load(open(path))
except Exception as e:  # the log above says why
    print(f"{w} {run}: no result ({e})"); sys.exit()
found = []
def walk(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if k in ("decode_tok_s", "prompt_seconds", "ttft_seconds") and isinstance(v, (int, float)):
                found.append(f"{path}{k} {v:.4g}")
            else:
                walk(v, f"{path}{k}." if k in ("workloads", "decode", "prompt") else path)
    elif isinstance(x, list):
        for v in x: walk(v, path)
walk(r)
print(f"{w} {run}: " + (", ".join(found) if found else str(r)[:300]))
PY
    grep -E "^ *(run|[0-9]+ ) |tok/s" "/tmp/bench-$name-$w.log" | head -12
  done
}
bench tiny-cuda "$M" /tmp/tiny.nstore --backend cuda --threads 8
if [ "${NEURAL_BENCH_20B:-0}" = 1 ]; then
  echo "== bench: synthetic gpt-oss-20b, raw store, cuda backend at 12 GiB, 8 threads"
  TOK=$M/tokenizer.json
  [ -f /tmp/s20/config.json ] || timeout 300 /tmp/b/engine/cli/neural synth --shape gpt-oss-20b /tmp/s20 \
    --tokenizer "$TOK" --threads 16 2>&1 | tail -1
  [ -f /tmp/s20.nstore ] || timeout 300 /tmp/b/engine/cli/neural repack --checkpoint /tmp/s20 \
    --out /tmp/s20.nstore --format raw --threads 16 2>&1 | tail -1
  bench s20-cuda /tmp/s20 /tmp/s20.nstore --backend cuda --vram-budget 12 --threads 8 \
    --tokens 64 --prompt-sizes 4096
fi
cp /tmp/bench-*.json "${OUT:-/tmp}/" 2>/dev/null || true
echo done
