#!/usr/bin/env bash
# The driver-API port on a machine with a GPU (docs/CUDA.md "Driver API and fatbin"), old against
# new in one chain of warm calls. Phase `build`: builds OLD (the runtime-API tree before the port)
# and NEW (this tree) side by side, runs every CUDA test of NEW, compares `neural logits` of both
# on the public fixture byte for byte, and starts making the synthetic 20b model in the
# background. Phase `bench`: same-machine A/B of decode (96 slots; 12 GiB), a 4,096-token prompt.
#   OLD, NEW      source trees (default .dev42old, the runtime-API tree of 57e7d36, and this tree)
# NEW is built for the architectures the product ships (the startup figure is the shipped
# fatbin's), OLD for sm_90. The GPU backend takes no CPU dense or prompt-kernel flags (they set
# the CPU backend), so both run at their defaults; the CPU-only rows of docs/BENCHMARKS.md pin
# them where the two trees' CPU defaults differ.
#   NEURAL_FX     a folder with fx.tar.xz (fixtures/tiny-gptoss-a) and debs/ (-dev packages)
# Logs go to $OUT (or /tmp).
set -uo pipefail
PHASE=${1:-build}
R=$(pwd); OLD=${OLD:-$R/.dev42old}; NEW=${NEW:-$R}; FX=${NEURAL_FX:-$R/.dev42fx}
O=${OUT:-/tmp}; B=/tmp/dapi; mkdir -p $B
exec > >(tee -a "$O/driver-api-$PHASE.log") 2>&1
if [ "$PHASE" = build ]; then
  [ -d "$FX/debs" ] && { for f in "$FX"/debs/*.deb; do dpkg -x "$f" /; done; ldconfig; }
  mkdir -p $B/shared/fixtures && tar -xJf "$FX/fx.tar.xz" -C $B/shared/fixtures
  nproc; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  t0=$(date +%s)
  for v in old new; do
    src=$OLD; [ $v = new ] && src=$NEW
    arch=-DCMAKE_CUDA_ARCHITECTURES=90; [ $v = new ] && arch=
    cmake -S "$src" -B $B/$v -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEURAL_GUI=OFF -DNEURAL_CUDA=ON \
      -DNEURAL_BENCHMARKS=OFF $arch -DNEURAL_SHARED_DIR=$B/shared \
      > $B/cfg-$v.log 2>&1 || { echo "configure $v failed"; tail -20 $B/cfg-$v.log; exit 1; }
    echo "configured $v"
  done
  # (wait with a pid: a bare `wait` also waits for the tee above, which never ends)
  ninja -C $B/old -j8 neural > $B/build-old.log 2>&1 &
  old_pid=$!
  ninja -C $B/new -j8 neural neural_cuda_tests > $B/build-new.log 2>&1; rn=$?
  wait $old_pid; ro=$?
  echo "builds: old rc $ro, new rc $rn, $(( $(date +%s) - t0 )) s"
  [ $rn = 0 ] || { grep -E "error|FAILED" -A3 $B/build-new.log | head -40; exit 1; }
  [ $ro = 0 ] || { grep -E "error|FAILED" -A3 $B/build-old.log | head -40; }
  echo "== new: no CUDA library linked"; ldd $B/new/engine/cli/neural | grep -iE "cuda|nvidia" || echo "none"
  echo "== old: linked"; ldd $B/old/engine/cli/neural | grep -iE "cuda" || echo "none"
  ls -la $B/new/engine/cuda/neural_kernels.fatbin
  command -v cuobjdump > /dev/null && cuobjdump --list-elf --list-ptx $B/new/engine/cuda/neural_kernels.fatbin | sed 's/.*\(sm_[0-9]*\|compute_[0-9]*\).*/\1/' | sort | uniq -c
  # The 20b model for the bench phase, made while the tests run.
  T=$B/shared/fixtures/tiny-gptoss-a/tokenizer.json
  setsid nohup bash -c "$B/new/engine/cli/neural synth --shape gpt-oss-20b /dev/shm/u20 --tokenizer $T --threads 4 > $B/synth.log 2>&1 && $B/new/engine/cli/neural repack --checkpoint /dev/shm/u20 --out /dev/shm/u20.raw --format raw --threads 4 >> $B/synth.log 2>&1; echo SYNTHDONE \$? >> $B/synth.log" < /dev/null > /dev/null 2>&1 &
  echo "== new: every CUDA test"; t0=$(date +%s)
  (cd $B/new && timeout ${TEST_TIMEOUT:-420} ./tests/cuda/neural_cuda_tests --gtest_brief=1 2>&1 | tail -40)
  echo "cuda tests $(( $(date +%s) - t0 )) s"
  echo "== logits, old vs new, cuda backend, public fixture"
  M=$B/shared/fixtures/tiny-gptoss-a
  for v in old new; do
    $B/$v/engine/cli/neural logits $M $M/prompts.json $B/logits-$v.json --backend cuda --steps 16 > $B/logits-$v.log 2>&1
    echo "$v rc $? $(sha256sum < $B/logits-$v.json)"
  done
  # Every figure compared; "source" names the build and its backend, which differ by design.
  python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); [d.pop("source",None) for d in (a,b)]; print(a["source"] if 0 else "", "LOGITS BIT-IDENTICAL" if a==b else "LOGITS DIFFER")' $B/logits-old.json $B/logits-new.json
  grep -h '"source"' $B/logits-old.json $B/logits-new.json | cut -c1-160
  cp $B/logits-new.json "$O/" 2>/dev/null
  tail -2 $B/synth.log
  exit 0
fi
# bench
while ! grep -q SYNTHDONE $B/synth.log 2>/dev/null; do sleep 5; done; tail -3 $B/synth.log
run() {  # run VARIANT ARGS...
  local v=$1; shift
  echo "-- $v $*"
  $B/$v/engine/cli/neural bench --model /dev/shm/u20 --store /dev/shm/u20.raw --backend cuda \
    --threads 8 --no-probes "$@" 2>&1 | grep -vE "^\[|^ *$" | tail -12
}
for v in old new new old; do run $v --pool-slots 96 --workload decode --tokens 64 --repeat 2; done
for v in old new; do run $v --vram-budget 12 --workload decode --tokens 64 --repeat 2; done
for v in new old; do run $v --pool-slots 96 --workload prompt --prompt-sizes 4096; done
echo BENCHDONE
