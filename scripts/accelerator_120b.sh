#!/usr/bin/env bash
# gpt-oss-120b side by side with ik_llama.cpp on one single-GPU accelerator machine (128 GiB RAM,
# 64 GiB disk): docs/BENCHMARKS.md "Server replay" and the chain below it. The files take turns:
# the synthetic checkpoint (65 GB) in /dev/shm -> llama.cpp's converter writes the GGUF to the
# local disk -> the checkpoint is deleted -> `neural repack` writes the raw expert store from the
# GGUF to /dev/shm. Both engines then run from the GGUF (ik: all of it; Neural: its dense tensors,
# with the store). Long steps run as setsid background jobs that outlive a 10-minute call while
# the machine stays warm; every step writes a line to $L/status; call `status` to follow them.
#
#   scripts/accelerator_120b.sh PHASE...
# On the development machine, once, from the project root:
#   pack IK_GIT_DIR LCPP_GIT_DIR   ../shared/tools/anchors/pack.sh (ik's sources, the converter,
#                         the Debian .debs, the tokenizer) plus what it leaves out that this
#                         chain needs: ik's server sources, gpt-oss's chat template, and the Qt
#                         packages neural-server links (.anchors/qt-debs); carry .anchors.
#   qt-debs DIR  only those Qt packages, into DIR
#   nb BUILD_DIR neural and neural-server of a Release build with CUDA (sm_90 among its
#                architectures) into .anchors/nb.tar.xz: setup then skips building Neural; an
#                .anchors/ik-bin.tar.xz (llama-bench, llama-server and their libraries, built for
#                the machine's GPU) likewise skips ik's build
# On the accelerator machine, from the project root with .anchors carried:
#   setup        unpack; start ik's build (llama-bench, llama-server) in the background, build
#                Neural (neural, neural-server; NEURAL_DESKTOP=OFF) in the foreground
#   all          setup, then one background chain: models bench probe replay (then `status`)
#   models       (background) synth -> GGUF -> delete checkpoint -> raw store; MODEL=u120 (uniform,
#                default) or MODEL=k120 (--router-skew 1.0; replaces the uniform files)
#   bench        (background) equal VRAM: Neural --vram-budget 12, ik --n-cpu-moe N with N the
#                smallest whose VRAM (nvidia-smi, sampled) is at most Neural's; llama-bench tg64
#                against `neural bench --workload decode` fresh and with learned statistics
#   replay       (background) scripts/replay_servers.py: bench/workloads against fresh
#                neural-server and llama-server, order Neural ik ik Neural, VRAM sampled
#   probe        the RAM probe at 8 and 16 threads and the pinned host-to-device bandwidth
#   status       the status file, the tails of the logs, memory, disk, GPU; copies the results
#                ($L/results) to $OUT
#   wait SECONDS waits (at most SECONDS) until no background step runs, then `status`
#   ik-build     (background) ik's CUDA build alone
# Environment (defaults for the accelerator machine; the phases replay and probe also run on a
# development machine with the tiny fixture, see docs/BENCHMARKS.md):
#   L=/opt/l (work folder), SHM=/dev/shm, NB=/opt/nb (Neural's build), MODEL=u120,
#   GGUF=$L/$MODEL.gguf, RAW=$SHM/$MODEL.raw, THREADS=8, VRAM_GIB=12, BACKEND=cuda,
#   IK_BIN=$L/ik/build/bin, IK_NCMOE (skip the fit), IK_SERVER_CMD / NEURAL_SERVER_CMD (replace
#   the replay's server commands; {port} is the port), REPLAY_ARGS (more replay_servers.py flags),
#   PROBE_THREADS="8 16", IK_JOBS=16, IK_RTR=1 (0: ik maps the GGUF instead of loading and
#   repacking it into its own memory, ~55 GiB beside the 57 GiB store in /dev/shm),
#   IK_SERVER_EXTRA (more llama-server flags, e.g. "-ub 4096 -b 4096").
set -uo pipefail
R=$(pwd)
SELF=$(readlink -f "$0")
A=$R/.anchors
L=${L:-/opt/l}
SHM=${SHM:-/dev/shm}
NB=${NB:-/opt/nb}
MODEL=${MODEL:-u120}
GGUF=${GGUF:-$L/$MODEL.gguf}
RAW=${RAW:-$SHM/$MODEL.raw}
CKPT=$SHM/$MODEL
THREADS=${THREADS:-8}
VRAM_GIB=${VRAM_GIB:-12}
BACKEND=${BACKEND:-cuda}
IK_BIN=${IK_BIN:-$L/ik/build/bin}
RES=$L/results
NEURAL=$NB/engine/cli/neural
NEURAL_SERVER=$NB/server/neural-server
STATS=$L/$MODEL.routing-stats.json
mkdir -p "$L" "$RES"

note() { echo "$(date -u +%FT%TZ) $*" | tee -a "$L/status"; }
# step NAME CMD...: runs CMD with its output in $L/NAME.log and its outcome in the status file.
step() {
  local name=$1; shift
  note "$name start"
  local t0=$SECONDS
  "$@" > "$L/$name.log" 2>&1
  local rc=$?
  note "$name $([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc") $((SECONDS - t0)) s"
  return $rc
}
# background NAME PHASE...: this script's phases as a job that outlives the call.
background() {
  local name=$1; shift
  note "$name queued (background: ${*})"
  IN_CHAIN=1 MODEL=$MODEL L=$L setsid nohup bash "$SELF" "$@" > "$L/bg-$name.log" 2>&1 < /dev/null &
  echo $! > "$L/bg-$name.pid"
}
running() {  # the background jobs still alive
  local f
  for f in "$L"/bg-*.pid; do
    [ -f "$f" ] && kill -0 "$(cat "$f")" 2> /dev/null && basename "$f" .pid
  done
}
# peak_vram FILE CMD...: CMD with nvidia-smi sampling every 250 ms; the peak MiB goes to FILE.
peak_vram() {
  local out=$1; shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 > "$out.samples" 2> /dev/null &
  local smi=$!
  "$@"
  local rc=$?
  kill $smi 2> /dev/null; wait $smi 2> /dev/null
  sort -n "$out.samples" | tail -1 > "$out"
  echo "peak VRAM $(cat "$out") MiB: $*"
  return $rc
}

# ---- development machine -------------------------------------------------------------------

phase_pack() {
  local ik=${1:?pack IK_GIT_DIR LCPP_GIT_DIR} lcpp=${2:?pack IK_GIT_DIR LCPP_GIT_DIR}
  local shared=${NEURAL_SHARED_DIR:-../shared}
  bash "$shared/tools/anchors/pack.sh" "$ik" "$lcpp" || return 1
  local tmp; tmp=$(mktemp -d)
  # pack.sh leaves out examples/server (llama-server) and models/ (the chat templates).
  git --git-dir="$ik" ls-tree -r HEAD | while read -r _ type obj path; do
    [ "$type" = blob ] || continue
    case "$path" in
      examples/server/webui*|examples/server/themes/*|examples/server/bench/*|examples/server/tests/*|examples/server/public_legacy/*) continue ;;
      examples/server/*|models/templates/openai-gpt-oss-120b.jinja) ;;
      *) continue ;;
    esac
    mkdir -p "$tmp/ik/$(dirname "$path")"
    # A snapshot may lack its largest files (index_llamacpp.html; the build embeds the .gz).
    git --git-dir="$ik" cat-file blob "$obj" > "$tmp/ik/$path" 2> /dev/null || rm -f "$tmp/ik/$path"
  done
  tar -C "$tmp" -cJf "$A/ik-server.tar.xz" ik && rm -rf "$tmp"
  pack_qt_debs "$A/qt-debs" || return 1
  du -sh "$A" "$A/qt-debs"
}

# pack_qt_debs DIR: neural-server needs Qt Core, Network and HttpServer: the -dev packages, moc,
# and the packages of every library they load here (ldd's closure); the C library and the
# compiler's runtime are the machine's own. setup unpacks only those the machine lacks.
pack_qt_debs() {
  mkdir -p "$1"
  local pkgs="qt6-base-dev qt6-base-dev-tools qt6-httpserver-dev qt6-websockets-dev libqt6core6 libqt6network6 libqt6httpserver6 libqt6websockets6"
  local lib owner
  for lib in $(ldd /usr/lib/qt6/libexec/moc /usr/lib/x86_64-linux-gnu/libQt6HttpServer.so.6 \
      /usr/lib/x86_64-linux-gnu/libQt6WebSockets.so.6 /usr/lib/x86_64-linux-gnu/libQt6Network.so.6 \
      | awk '/=> \//{print $3}' | sort -u); do
    # dpkg knows a library by the path its package installed (/lib or /usr/lib: merged /usr).
    owner=$(dpkg -S "*x86_64-linux-gnu/$(basename "$(readlink -f "$lib")")" 2> /dev/null | head -1 | cut -d: -f1)
    [ -n "$owner" ] || { echo "pack_qt_debs: no package owns $lib" >&2; return 1; }
    pkgs="$pkgs $owner"
  done
  pkgs=$(echo "$pkgs" | tr ' ' '\n' | grep -vxE 'libc6|libgcc-s1|libstdc\+\+6|' | sort -u | tr '\n' ' ')
  echo "Qt packages: $pkgs"
  (cd "$1" && apt-get download $pkgs > /dev/null) || return 1
  du -sh "$1"
}

# ---- accelerator machine -------------------------------------------------------------------

phase_setup() {
  [ -d "$A" ] || { echo "no .anchors: run the pack phase on the development machine and carry .anchors"; return 1; }
  local f p
  for f in "$A"/debs/*.deb; do dpkg -x "$f" /; done
  for f in "$A"/qt-debs/*.deb; do
    p=$(dpkg-deb -f "$f" Package)
    dpkg -s "$p" > /dev/null 2>&1 || dpkg -x "$f" /
  done
  ldconfig
  mkdir -p "$L/tok"
  tar -xJf "$A/ik.tar.xz" -C "$L" && tar -xJf "$A/ik-server.tar.xz" -C "$L" \
    && tar -xJf "$A/lcpp-py.tar.xz" -C "$L" && tar -xJf "$A/tokenizer.tar.xz" -C "$L/tok" || return 1
  note "machine: $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader)"
  df -h "$SHM" "$L" | tee -a "$L/status"
  # ik first, with most cores: its CUDA build is the longest step of the chain.
  if [ -f "$A/ik-bin.tar.xz" ]; then  # ik built beforehand for this machine's GPU (IK_BIN)
    mkdir -p "$IK_BIN" && tar -xJf "$A/ik-bin.tar.xz" -C "$IK_BIN" || return 1
  else
    background ik-build ik-build
  fi
  if [ -f "$A/nb.tar.xz" ]; then  # Neural built beforehand (the nb phase), for sm_90 among others
    mkdir -p "$NB" && tar -xJf "$A/nb.tar.xz" -C "$NB" || return 1
    note "neural: prebuilt ($(cat "$NB/REVISION" 2> /dev/null))"
  else
    step neural-build build_neural || return 1
  fi
}

# phase_nb BUILD_DIR (development machine): neural and neural-server of a Release build with
# CUDA, packed into .anchors/nb.tar.xz so the accelerator machine skips building them.
phase_nb() {
  local b=${1:?nb BUILD_DIR} tmp; tmp=$(mktemp -d)
  mkdir -p "$tmp/engine/cli" "$tmp/server"
  cp "$b/engine/cli/neural" "$b/engine/cli/libneural_cpu_persistent.so" "$tmp/engine/cli/" || return 1
  cp "$b/server/neural-server" "$b/engine/cli/libneural_cpu_persistent.so" "$tmp/server/" || return 1
  git -C "$R" describe --always --dirty > "$tmp/REVISION"
  tar -C "$tmp" -cJf "$A/nb.tar.xz" . && rm -rf "$tmp"
  ls -la "$A/nb.tar.xz"
}

build_neural() {
  cmake -S "$R" -B "$NB" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEURAL_GUI=ON -DNEURAL_DESKTOP=OFF \
    -DNEURAL_TESTS=OFF -DNEURAL_BENCHMARKS=OFF -DNEURAL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 || return 1
  ninja -C "$NB" -j6 neural neural-server
}

phase_ik_build() {
  cd "$L/ik" || return 1
  # CMake 3.25 knows no CUDA20 flags of its own: name them.
  PATH=/usr/local/cuda/bin:$PATH step ik-cmake cmake -S . -B build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON \
    -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20 \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DCMAKE_BUILD_TYPE=Release || return 1
  PATH=/usr/local/cuda/bin:$PATH step ik-build cmake --build build -j"${IK_JOBS:-16}" --target llama-bench llama-server
}

need_shm() {  # need_shm BYTES: /dev/shm must hold BYTES more; tmpfs defaults to half the RAM
  local free; free=$(df -B1 --output=avail "$SHM" | tail -1)
  [ "$free" -ge "$1" ] && return 0
  mount -o remount,size=$(( $(free -b | awk '/Mem:/{print $2}') * 95 / 100 )) "$SHM" 2> /dev/null
  free=$(df -B1 --output=avail "$SHM" | tail -1)
  [ "$free" -ge "$1" ] || { note "$SHM has $free bytes free, needs $1"; return 1; }
}

phase_models() {
  local skew=0
  [ "$MODEL" = k120 ] && skew=1.0
  # One model's files at a time: the other model's go first.
  rm -rf "$SHM"/u120 "$SHM"/k120 "$SHM"/u120.raw "$SHM"/k120.raw "$L"/u120.gguf "$L"/k120.gguf
  need_shm 67000000000 || return 1
  [ "$(df -B1 --output=avail "$L" | tail -1)" -ge 62000000000 ] || { note "$L: less than 62 GB free for the GGUF"; return 1; }
  step "synth-$MODEL" "$NEURAL" synth --shape gpt-oss-120b "$CKPT" --tokenizer "$L/tok/tokenizer.json" \
    --router-skew $skew --threads "$(nproc)" || return 1
  # The converter's default output for gpt-oss: MXFP4 experts, BF16 dense tensors (what Neural
  # reads: docs/USER_GUIDE.md "A GGUF you already have").
  step "gguf-$MODEL" bash -c "cd '$L/lcpp' && PYTHONPATH=gguf-py python3 convert_hf_to_gguf.py '$CKPT' \
    --outfile '$GGUF'" || return 1
  rm -rf "$CKPT"
  step "repack-$MODEL" "$NEURAL" repack --checkpoint "$GGUF" --out "$RAW" --format raw --threads "$(nproc)" || return 1
  ls -la "$GGUF" "$RAW" >> "$L/status"
}

wait_for() {  # wait_for WHAT TEST...
  local _
  for _ in $(seq 1 720); do "${@:2}" && return 0; sleep 5; done
  note "gave up waiting for $1"; return 1
}

phase_bench() {
  wait_for "ik's build" test -x "$IK_BIN/llama-bench" || return 1
  wait_for "the raw store" test -s "$RAW" || return 1
  local tok=64
  # Neural first, fresh (no statistics), then with what that run learned.
  rm -f "$STATS"
  step neural-decode-fresh peak_vram "$RES/neural-vram.mib" "$NEURAL" bench --model "$GGUF" --store "$RAW" \
    --backend "$BACKEND" --vram-budget "$VRAM_GIB" --threads "$THREADS" --routing-stats "$STATS" \
    --workload decode --tokens $tok --repeat 3 --no-probes --json "$RES/neural-decode-fresh.json"
  step neural-decode-learned "$NEURAL" bench --model "$GGUF" --store "$RAW" --backend "$BACKEND" \
    --vram-budget "$VRAM_GIB" --threads "$THREADS" --routing-stats "$STATS" \
    --workload decode --tokens $tok --repeat 3 --no-probes --json "$RES/neural-decode-learned.json"
  local target; target=$(cat "$RES/neural-vram.mib")
  local n=${IK_NCMOE:-}
  [ -n "$n" ] || n=$(ik_fit "$target") || return 1
  echo "$n" > "$RES/ik-ncmoe"
  note "ik --n-cpu-moe $n (Neural's peak VRAM $target MiB)"
  step ik-tg64 peak_vram "$RES/ik-vram.mib" "$IK_BIN/llama-bench" -m "$GGUF" -ngl 99 -fa 1 --n-cpu-moe "$n" \
    -t "$THREADS" -fmoe 1 -rtr "${IK_RTR:-1}" -p 0 -n $tok -r 3 -o json
  cp "$L/ik-tg64.log" "$RES/ik-tg64.log"
  cp "$L"/neural-decode-*.log "$RES/"
}

# ik_fit TARGET_MIB: the smallest --n-cpu-moe whose llama-bench VRAM is at most TARGET_MIB.
# VRAM does not depend on -rtr (it repacks the CPU's tensors), so the fit runs without it. One
# load with every layer's experts on the CPU gives the base; the GGUF's own tensor sizes give what
# each layer's experts add on the GPU; the estimate is then checked by loading it (at most 3 more).
ik_fit() {
  local target=$1 layers n peak
  probe_ik() {
    peak_vram "$RES/ik-fit-$1.mib" "$IK_BIN/llama-bench" -m "$GGUF" -ngl 99 -fa 1 --n-cpu-moe "$1" -t "$THREADS" \
      -fmoe 1 -p 0 -n 8 -r 1 >> "$L/ik-fit.log" 2>&1
    cat "$RES/ik-fit-$1.mib"
  }
  # Per layer, the bytes of its expert tensors (blk.N.ffn_*_exps), from the GGUF's header.
  PYTHONPATH="$L/lcpp/gguf-py" python3 - "$GGUF" > "$RES/ik-expert-bytes.txt" << 'EOF' || return 1
import sys
from collections import defaultdict
from gguf import GGUFReader
per = defaultdict(int)
for t in GGUFReader(sys.argv[1]).tensors:
    if "_exps" in t.name:
        per[int(t.name.split(".")[1])] += int(t.n_bytes)
for layer in sorted(per):
    print(layer, per[layer])
EOF
  layers=$(wc -l < "$RES/ik-expert-bytes.txt")
  local base; base=$(probe_ik "$layers")
  echo "ik_fit: --n-cpu-moe $layers (all experts on the CPU) -> $base MiB (target $target)" >> "$L/status"
  # The smallest N whose layers N.. fit in what the target leaves above the base.
  n=$(awk -v room=$(( (target - base) * 1048576 )) '{b[$1]=$2; n=NR} END {
        used=0; for (l = n - 1; l >= 0; l--) { if (used + b[l] > room) { print l + 1; exit } used += b[l] } print 0 }' \
      "$RES/ik-expert-bytes.txt")
  [ "$n" -lt "$layers" ] || [ "$base" -le "$target" ] || { echo "ik_fit: $base MiB with every expert on the CPU, above $target" >&2; return 1; }
  local left=3
  while [ $left -gt 0 ] && [ "$n" -lt "$layers" ]; do
    peak=$(probe_ik "$n")
    echo "ik_fit: --n-cpu-moe $n -> $peak MiB (target $target)" >> "$L/status"
    [ "$peak" -le "$target" ] && break
    n=$((n + 1)); left=$((left - 1))
  done
  [ $left -gt 0 ] || { echo "ik_fit: no --n-cpu-moe up to $n fits $target MiB" >&2; return 1; }
  echo "$n"
}

phase_replay() {
  local n=${IK_NCMOE:-$(cat "$RES/ik-ncmoe" 2> /dev/null)}
  [ -n "${IK_SERVER_CMD:-}" ] || [ -n "$n" ] || { note "replay: no --n-cpu-moe yet (bench phase, or IK_NCMOE)"; return 1; }
  [ -n "${IK_SERVER_CMD:-}" ] || wait_for "ik's server" test -x "$IK_BIN/llama-server" || return 1
  local vram=""; [ "$BACKEND" = cpu ] || vram="--vram-budget $VRAM_GIB"
  # Both of Neural's runs start from the statistics the decode bench learned (a copy per run, so
  # the first run's learning does not reach the second).
  local neural="bash -c 'cp $STATS $STATS.run 2>/dev/null || rm -f $STATS.run; exec $NEURAL_SERVER --model $GGUF --store $RAW --backend $BACKEND $vram --threads $THREADS --routing-stats $STATS.run --host 127.0.0.1 --port {port}'"
  local rtr=""; [ "${IK_RTR:-1}" = 1 ] && rtr=-rtr
  local ik="$IK_BIN/llama-server -m $GGUF -ngl 99 -fa on --n-cpu-moe $n -t $THREADS -tb $THREADS $rtr --jinja --chat-template-file $L/ik/models/templates/openai-gpt-oss-120b.jinja -c 32768 --host 127.0.0.1 --port {port} ${IK_SERVER_EXTRA:-}"
  local sample=""; [ "$BACKEND" = cpu ] || sample=--sample-vram
  step replay python3 "$R/scripts/replay_servers.py" --server "neural=${NEURAL_SERVER_CMD:-$neural}" \
    --server "ik=${IK_SERVER_CMD:-$ik}" --order neural,ik,ik,neural $sample --log-dir "$RES/replay-logs" \
    --json "$RES/replay.json" ${REPLAY_ARGS:-}
  local rc=$?
  cp "$L/replay.log" "$RES/replay.txt"
  # Status 3: the report is complete but the engines' prompt token counts disagree; say so and
  # let the chain go on to the probes.
  [ $rc -eq 3 ] && { note "replay: the engines' prompt token counts disagree (replay.txt)"; rc=0; }
  return $rc
}

phase_probe() {
  local tiny=$L/probe-tiny t
  [ -f "$tiny/config.json" ] || "$NEURAL" synth --shape tiny "$tiny" --tokenizer "${PROBE_TOKENIZER:-$L/tok/tokenizer.json}" > /dev/null || return 1
  for t in ${PROBE_THREADS:-8 16}; do
    step "probe-$t" "$NEURAL" bench --model "$tiny" --backend "$BACKEND" --threads "$t" --workload decode \
      --tokens 2 --json "$RES/probe-$t.json"
    python3 - "$RES/probe-$t.json" "$t" << 'EOF' | tee -a "$L/status"
import json, sys
p = json.load(open(sys.argv[1]))["probes"]
print(f"probe threads {sys.argv[2]}: {json.dumps(p)}")
EOF
  done
}

phase_status() {
  echo "== status"; cat "$L/status" 2> /dev/null
  echo "== running: $(running | tr '\n' ' ')"
  local f
  for f in $(ls -t "$L"/*.log 2> /dev/null | head -4); do echo "== $f"; tail -5 "$f"; done
  echo "== memory"; free -g | head -2; df -h "$SHM" "$L" 2> /dev/null | tail -2
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
  if [ -n "${OUT:-}" ]; then cp -r "$RES" "$OUT/" 2> /dev/null; cp "$L/status" "$OUT/" 2> /dev/null; fi
  return 0
}

phase_wait() {
  local until=$((SECONDS + ${1:-540}))
  while [ $SECONDS -lt $until ] && [ -n "$(running)" ]; do sleep 10; done
  phase_status
}

# The dispatch as a function: bash reads a script while it runs, and a function is parsed whole
# before it starts, so a long chain does not depend on the file staying unchanged on disk.
main() {
  [ $# -gt 0 ] || { sed -n '2,45p' "$SELF"; exit 2; }
  while [ $# -gt 0 ]; do
    p=$1; shift
    case "$p" in
      pack) phase_pack "$@"; exit $? ;;
      nb) phase_nb "${1:?nb BUILD_DIR}"; exit $? ;;
      qt-debs) pack_qt_debs "${1:?qt-debs DIR}"; exit $? ;;
      setup) phase_setup || exit 1 ;;
      all) phase_setup || exit 1; background chain models bench probe replay ;;
      models | bench | replay | probe)
        # Called directly (not in a chain), the long phases go to the background.
        if [ -n "${IN_CHAIN:-}" ] || [ "${FOREGROUND:-}" = 1 ] || [ "$p" = probe ]; then
          "phase_$p" || { note "$p failed: chain stopped"; exit 1; }
        else
          background "$p" "$p"
        fi ;;
      ik-build) phase_ik_build ;;
      chain) IN_CHAIN=1 ;;  # the phases after it run here, one after the other
      status) phase_status ;;
      wait) phase_wait "${1:-540}"; [ $# -gt 0 ] && shift ;;
      *) echo "unknown phase: $p (see the head of $0)"; exit 2 ;;
    esac
  done
}
main "$@"; exit $?
