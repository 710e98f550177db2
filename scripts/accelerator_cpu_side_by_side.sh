#!/usr/bin/env bash
# CPU only, like for like (docs/BENCHMARKS.md "CPU only, like for like"): Neural's faithful
# defaults against ik_llama.cpp reading its GGUF's bf16 output.weight, in one chain of warm calls
# on the accelerator machine, CUDA hidden from both. It shares the synthetic 20b that
# scripts/accelerator_driver_api.sh makes (/dev/shm/u20, its raw store) and that script's NEW
# build of Neural.
#   prep    (background) ik_llama.cpp built CPU-only on the machine (-DGGML_NATIVE=ON), and
#           llama.cpp's converter writes the GGUF once the checkpoint exists
#   bench   waits for both, then both engines at 8 and 16 threads: decode (64 tokens), prompts of
#           512 and 4,096 tokens; Neural's lossy opt-in (--dense int8-head) in rows of its own
#   A       a folder with ik.tar.xz and lcpp-py.tar.xz (../shared/tools/anchors/pack.sh)
#   N       Neural's CLI (default: the driver-API script's NEW build)
#   IKPRE   a folder with a llama-bench built CPU-only on this kind of machine and its two
#           libraries (libllama.so, libggml.so): prep skips ik's build
#   TOK     the tokenizer for synth when the driver-API script did not make the model (prep then
#           makes it: synth, raw store)
#   SHORT=1 bench: the decode rows only; EXTRA="flags" adds Neural decode rows with those flags
set -uo pipefail
PHASE=${1:-bench}
R=$(pwd); A=${A:-$R/.anchors-cpu}; L=/opt/cpu; N=${N:-/tmp/dapi/new/engine/cli/neural}
O=${OUT:-/tmp}; M=/dev/shm/u20
mkdir -p $L
if [ "$PHASE" = prep ]; then
  tar -xJf $A/ik.tar.xz -C $L && tar -xJf $A/lcpp-py.tar.xz -C $L || exit 1
  if [ -n "${IKPRE:-}" ]; then
    mkdir -p $L/ik/build/bin && cp "$IKPRE"/* $L/ik/build/bin/ && chmod +x $L/ik/build/bin/*
    ikbuild="echo IKDONE prebuilt"
  else
    ikbuild="cd $L/ik && cmake -S . -B build -G Ninja -DGGML_CUDA=OFF -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \\
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release > $L/ik-cmake.log 2>&1 \\
  && cmake --build build -j8 --target llama-bench > $L/ik-build.log 2>&1; echo IKDONE \$?"
  fi
  if [ ! -f /tmp/dapi/synth.log ]; then
    mkdir -p /tmp/dapi
    setsid nohup bash -c "$N synth --shape gpt-oss-20b $M --tokenizer ${TOK:?TOK: the tokenizer} --threads 16 > /tmp/dapi/synth.log 2>&1 && $N repack --checkpoint $M --out $M.raw --format raw --threads 16 >> /tmp/dapi/synth.log 2>&1; echo SYNTHDONE \$? >> /tmp/dapi/synth.log" < /dev/null > /dev/null 2>&1 &
  fi
  { echo "$ikbuild"; cat << EOS
while ! grep -q SYNTHDONE /tmp/dapi/synth.log 2> /dev/null; do sleep 5; done
cd $L/lcpp && PYTHONPATH=gguf-py python3 convert_hf_to_gguf.py $M --outfile $M.gguf > $L/conv.log 2>&1
echo "GGUFDONE \$?"
EOS
  } > $L/prep.sh
  setsid nohup bash $L/prep.sh > $L/prep.status 2>&1 < /dev/null &
  echo "prep started ($L/prep.status)"
  exit 0
fi
exec > >(tee -a "$O/cpu-side-by-side.log") 2>&1
for _ in $(seq 1 100); do grep -q GGUFDONE $L/prep.status 2> /dev/null && break; sleep 5; done
cat $L/prep.status; ls -la $M.gguf 2> /dev/null || { tail -20 $L/conv.log $L/ik-build.log; exit 1; }
export CUDA_VISIBLE_DEVICES= LD_LIBRARY_PATH=$L/ik/build/bin:${LD_LIBRARY_PATH:-}
IK=$L/ik/build/bin/llama-bench
ik() { echo "### ik $*"; timeout 200 $IK -m $M.gguf -ngl 0 -fmoe 1 -rtr 1 "$@" -o md 2>&1 | grep -E '\| +(tg|pp)[0-9]|rror' ; }
nb() { echo "### neural $*"; timeout 200 $N bench --model $M --store $M.raw --backend cpu "$@" 2>&1 \
  | grep -vE '^\[|^ *$' | tail -14; }
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-300
if [ "${SHORT:-0}" = 1 ]; then
  for t in 8 16; do
    ik -t $t -p 0 -n 64 -r 2
    nb --threads $t --workload decode --tokens 64 --repeat 2 --json $O/neural-cpu-decode-$t.json
    [ -n "${EXTRA:-}" ] && nb --threads $t --workload decode --tokens 64 --repeat 2 --no-probes $EXTRA
  done
  echo CPUDONE; exit 0
fi
for t in 8 16; do
  ik -t $t -p 512 -n 64 -r 2
  nb --threads $t --workload decode --tokens 64 --repeat 2 --json $O/neural-cpu-decode-$t.json
  nb --threads $t --workload prompt --prompt-sizes 512 --repeat 2 --no-probes
done
for t in 8 16; do
  ik -t $t -p 4096 -ub 4096 -b 4096 -n 0 -r 1
  nb --threads $t --workload prompt --prompt-sizes 4096 --no-probes
done
# The lossy opt-in, labelled as such: the int8 lm_head (changes the answers).
for t in 8 16; do nb --threads $t --workload decode --tokens 64 --repeat 2 --no-probes --dense int8-head; done
echo CPUDONE
