#!/usr/bin/env bash
# The RAM residency levers on an emulated 64 GB PC (docs/BENCHMARKS.md "RAM residency").
#
# Runs `neural bench --workload decode --repeat 2` (run 0 = the first answer after loading, run 1
# = a follow-up on the same loaded model) on the CPU backend and on the hybrid backend
# (--backend cuda --vram-budget 12 --threads 8), each without and with the levers --warmup-ram,
# --release-resident, --lock-ram, every run inside a cgroup v2 with memory.max = 64G (the page
# cache counts against it, as RAM does on a real 64 GB PC), caches dropped before each run. Writes
# OUT/summary.json and OUT/summary.md: first-answer and follow-up decode tok/s, page faults per
# token, major faults, peak memory.
#
#   scripts/ram_residency_bench.sh --model /tmp/s120 --store /data/s120.raw [options]
#
#   --model DIR        checkpoint folder (neural synth --shape gpt-oss-120b DIR --router-skew 1.0)
#   --store FILE       its raw expert store (neural repack --checkpoint DIR --out FILE --format raw)
#   --neural BIN       the neural binary (default: build/engine/cli/neural, then /tmp/b/...)
#   --out DIR          results (default: $OUT if set, else /tmp/ram-residency-<time>)
#   --limit SIZE       cgroup memory.max (default 64G; cgroup syntax: 64G = 64 GiB); "none": no limit
#   --ranking FILE     expert ranking (neural rank): static slots and the warm-up / lock order
#   --warmup SECONDS   --warmup-ram value (default 20)
#   --lock GIB         --lock-ram value (default 16)
#   --cpu-tokens N     decode tokens of the CPU runs (default 8)
#   --gpu-tokens N     decode tokens of the hybrid runs (default 32)
#   --run-timeout S    seconds one run may take before it is killed (default 150)
#   --budget S         total seconds; cases left when it runs out are skipped, said so (default 480)
#   --cases LIST       comma-separated subset of the case names below (default: all, in order)
#   --no-cpu / --no-gpu  leave out the CPU / hybrid cases
#   --no-drop          do not drop caches (a trial run on a shared machine; runs start warm)
#
# Where the store lives matters:
# - On a real disk (ext4, xfs, NVMe): the emulation works. Dropping caches makes each run start
#   cold; under memory.max the page cache of the store competes with everything else, pages are
#   evicted and read again (major faults), exactly the 64 GB PC's problem. Use this for figures.
# - In /dev/shm (tmpfs): the store's pages ARE its storage. They cannot be dropped or evicted,
#   they are charged to the cgroup of whoever wrote them (not the run's), and reading them never
#   touches a disk: memory.max then limits only the process's own memory, --release-resident and
#   cache drops do nothing to the store, and major faults stay ~0. Such runs show the levers'
#   overhead, not their benefit; the summary marks them "tmpfs".
# Never hangs: every step has a timeout; every step is logged to OUT/log.txt. Works without a
# writable cgroup tree (then systemd-run --scope -p MemoryMax=, else no limit, said clearly) and
# without permission to drop caches (then the store and checkpoint files are evicted one by one
# with posix_fadvise via dd iflag=nocache, else said so).
set -uo pipefail

MODEL="" STORE="" NEURAL="" RANKING=""
OUTDIR=${OUT:-/tmp/ram-residency-$(date +%Y%m%d-%H%M%S)}
LIMIT=64G WARMUP=20 LOCK=16 CPU_TOKENS=8 GPU_TOKENS=32 RUN_TIMEOUT=150 BUDGET=480 CASES=""
DO_CPU=1 DO_GPU=1 DO_DROP=1
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --store) STORE=$2; shift 2 ;;
    --neural) NEURAL=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --ranking) RANKING=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --lock) LOCK=$2; shift 2 ;;
    --cpu-tokens) CPU_TOKENS=$2; shift 2 ;;
    --gpu-tokens) GPU_TOKENS=$2; shift 2 ;;
    --run-timeout) RUN_TIMEOUT=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --cases) CASES=$2; shift 2 ;;
    --no-cpu) DO_CPU=0; shift ;;
    --no-gpu) DO_GPU=0; shift ;;
    --no-drop) DO_DROP=0; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "ram_residency_bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUTDIR" || { echo "ram_residency_bench: cannot create $OUTDIR" >&2; exit 2; }
LOG=$OUTDIR/log.txt
exec > >(tee -a "$LOG") 2>&1
T_START=$(date +%s)
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - T_START ))s] $*"; }
die() { log "ERROR: $*"; exit 1; }

[ -n "$MODEL" ] && [ -d "$MODEL" ] || die "--model DIR is required and must exist (got '$MODEL')"
[ -n "$STORE" ] && [ -f "$STORE" ] || die "--store FILE is required and must exist (got '$STORE')"
[ -z "$RANKING" ] || [ -f "$RANKING" ] || die "--ranking $RANKING not found"
if [ -z "$NEURAL" ]; then
  for c in build/engine/cli/neural /tmp/b/engine/cli/neural "$(command -v neural || true)"; do
    [ -n "$c" ] && [ -x "$c" ] && { NEURAL=$c; break; }
  done
fi
[ -n "$NEURAL" ] && [ -x "$NEURAL" ] || die "no neural binary (--neural BIN)"
HAVE_PY=1; command -v python3 >/dev/null || HAVE_PY=0

log "== ram_residency_bench: results in $OUTDIR"
log "neural: $NEURAL; model: $MODEL; store: $STORE; limit: $LIMIT; warmup ${WARMUP}s; lock ${LOCK} GiB"
log "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo), kernel $(uname -r), user $(id -un)"
command -v nvidia-smi >/dev/null && timeout 20 nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
swapon --show=NAME,SIZE --noheadings 2>/dev/null | sed 's/^/swap: /'
STORE_FS=$(stat -f -c %T "$STORE" 2>/dev/null || echo unknown)
MODEL_FS=$(stat -f -c %T "$MODEL" 2>/dev/null || echo unknown)
log "store file system: $STORE_FS; checkpoint file system: $MODEL_FS"
TMPFS=0
if [ "$STORE_FS" = tmpfs ] || [ "$STORE_FS" = ramfs ]; then
  TMPFS=1
  log "NOTE: the store is on $STORE_FS: its pages cannot be dropped or evicted and are not charged"
  log "      to the run's cgroup; these runs show the levers' overhead, not a 64 GB PC's paging."
  log "      For figures, put the store on a real disk (e.g. --store /data/s120.raw)."
fi
log "ulimit -l: $(ulimit -l) KiB (root / CAP_IPC_LOCK locks without limit)"

# --- memory limit: cgroup v2 directly, else systemd-run, else none --------------------------------
CG_ROOT=/sys/fs/cgroup
LIMIT_MODE=none
limit_bytes() {  # cgroup size syntax -> bytes (for the log)
  local v=${1%[KkMmGgTt]} u=${1: -1}
  case "$u" in K|k) echo $((v<<10));; M|m) echo $((v<<20));; G|g) echo $((v<<30));; T|t) echo $((v<<40));; *) echo "$1";; esac
}
setup_limit() {
  # The limit this shell already runs under (a container's own cgroup), for the record.
  local own; own=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup 2>/dev/null)
  [ -r "$CG_ROOT$own/memory.max" ] && log "own cgroup ${own:-/}: memory.max $(cat "$CG_ROOT$own/memory.max")"
  [ "$LIMIT" = none ] && { log "limit: none (asked)"; return; }
  if [ "$(stat -f -c %T $CG_ROOT 2>/dev/null)" = cgroup2fs ] && [ -w "$CG_ROOT" ]; then
    local probe=$CG_ROOT/neural-ram-probe-$$
    if mkdir "$probe" 2>/dev/null; then
      if [ ! -e "$probe/memory.max" ]; then
        log "cgroup: the memory controller is not enabled for children of $CG_ROOT; trying +memory"
        if ! echo +memory > "$CG_ROOT/cgroup.subtree_control" 2>>"$LOG"; then
          log "cgroup: cannot enable it (a container's root cgroup with processes in it refuses: EBUSY)"
        fi
      fi
      if [ -e "$probe/memory.max" ] && echo "$LIMIT" > "$probe/memory.max" 2>>"$LOG" &&
         timeout 10 bash -c 'echo $$ > "$1/cgroup.procs"' _ "$probe" 2>>"$LOG"; then
        LIMIT_MODE=cgroup
        log "limit: cgroup v2 under $CG_ROOT, memory.max=$LIMIT ($(limit_bytes "$LIMIT") bytes), a fresh cgroup per run"
      fi
      rmdir "$probe" 2>/dev/null
    else
      log "cgroup: cannot create a cgroup under $CG_ROOT"
    fi
  else
    log "cgroup: $CG_ROOT is not a writable cgroup v2 mount"
  fi
  if [ "$LIMIT_MODE" = none ] && command -v systemd-run >/dev/null; then
    if timeout 20 systemd-run --scope --quiet -p MemoryMax="$LIMIT" true >>"$LOG" 2>&1; then
      LIMIT_MODE=systemd
      log "limit: systemd-run --scope -p MemoryMax=$LIMIT"
    else
      log "systemd-run: cannot start a scope (no systemd manager here?)"
    fi
  fi
  [ "$LIMIT_MODE" = none ] && log "WARNING: NO MEMORY LIMIT COULD BE SET: the runs use all $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) of RAM, not a 64 GB PC"
}
setup_limit

# --- dropping caches ------------------------------------------------------------------------------
DROP_MODE=none
drop_caches() {
  if [ $DO_DROP = 0 ]; then DROP_MODE="none (--no-drop)"; return; fi
  sync
  if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
    DROP_MODE=drop_caches
  else
    DROP_MODE=fadvise
    local f
    for f in "$STORE" "$MODEL"/*.safetensors; do
      [ -f "$f" ] && timeout 60 dd if="$f" iflag=nocache count=0 status=none 2>/dev/null || DROP_MODE=none
    done
  fi
  [ $TMPFS = 1 ] && DROP_MODE="$DROP_MODE (store on tmpfs: stays in RAM)"
}
drop_caches
log "dropping caches: $DROP_MODE"
[ "${DROP_MODE%% *}" = none ] && log "WARNING: caches could not be dropped: runs after the first start warm"

# --- one run --------------------------------------------------------------------------------------
# rusage.py: runs the command, then writes the children's rusage (major/minor faults, max RSS)
# and the wall time as JSON.
cat > "$OUTDIR/rusage.py" <<'PY'
import json, resource, subprocess, sys, time
out = sys.argv[1]
t0 = time.time()
rc = subprocess.call(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
json.dump({"rc": rc, "wall_s": time.time() - t0, "major_faults": r.ru_majflt,
           "minor_faults": r.ru_minflt, "max_rss_kb": r.ru_maxrss}, open(out, "w"))
sys.exit(rc if rc >= 0 else 128 - rc)
PY

run_case() {  # NAME BACKEND(cpu|cuda) LEVER-FLAGS...
  local name=$1 backend=$2; shift 2
  local now=$(( $(date +%s) - T_START ))
  if [ $(( now + RUN_TIMEOUT )) -gt "$BUDGET" ]; then
    log "SKIP $name: the time budget (${BUDGET}s) would be exceeded (--budget, --cases)"
    echo "{\"case\": \"$name\", \"skipped\": \"time budget\"}" > "$OUTDIR/$name.meta.json"
    return
  fi
  local args=(bench --model "$MODEL" --store "$STORE" --workload decode --repeat 2 --no-probes
              --threads 8 --json "$OUTDIR/$name.json")
  if [ "$backend" = cuda ]; then
    args+=(--backend cuda --vram-budget 12 --tokens "$GPU_TOKENS")
    [ -n "$RANKING" ] && args+=(--ranking "$RANKING")
  else
    args+=(--backend cpu --tokens "$CPU_TOKENS")
    # --ranking is a GPU flag; on the CPU it orders the warm-up / lock only
    [ -n "$RANKING" ] && [ $# -gt 0 ] && args+=(--ranking "$RANKING")
  fi
  args+=("$@")
  drop_caches
  local cg="" wrap=()
  case "$LIMIT_MODE" in
    cgroup)
      cg=$CG_ROOT/neural-ram-$$-$name
      mkdir "$cg" && echo "$LIMIT" > "$cg/memory.max" || { log "cannot create cgroup $cg"; cg=""; }
      [ -n "$cg" ] && wrap=(bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$cg") ;;
    systemd) wrap=(systemd-run --scope --quiet -p MemoryMax="$LIMIT") ;;
  esac
  local py=()
  [ $HAVE_PY = 1 ] && py=(python3 "$OUTDIR/rusage.py" "$OUTDIR/$name.rusage.json")
  log "RUN $name: $NEURAL ${args[*]}"
  local t0=$(date +%s.%N)
  NEURAL_LOG=info timeout -k 15 "$RUN_TIMEOUT" "${wrap[@]}" "${py[@]}" "$NEURAL" "${args[@]}" \
    > "$OUTDIR/$name.out" 2> "$OUTDIR/$name.err" < /dev/null
  local rc=$?
  local wall; wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  local peak="" pgmaj="" oom=""
  if [ -n "$cg" ]; then
    peak=$(cat "$cg/memory.peak" 2>/dev/null)
    pgmaj=$(awk '$1 == "pgmajfault" {print $2}' "$cg/memory.stat" 2>/dev/null)
    oom=$(awk '$1 == "oom_kill" {print $2}' "$cg/memory.events" 2>/dev/null)
    timeout 10 bash -c 'while ! rmdir "$1" 2>/dev/null; do sleep 0.5; done' _ "$cg" || log "cgroup $cg left behind"
  fi
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && log "  $name: killed after ${RUN_TIMEOUT}s (timeout) or by the OOM killer (rc $rc)"
  [ "$rc" != 0 ] && tail -5 "$OUTDIR/$name.err" | sed 's/^/  stderr: /'
  grep -hE -- "--warmup-ram|--lock-ram|--release-resident|backend:" "$OUTDIR/$name.err" | sed 's/^/  log: /'
  log "  $name: rc $rc, ${wall}s, cgroup peak ${peak:-?} bytes, cgroup pgmajfault ${pgmaj:-?}, oom_kill ${oom:-?}"
  cat > "$OUTDIR/$name.meta.json" <<JSON
{"case": "$name", "backend": "$backend", "levers": "$*", "rc": $rc, "wall_s": $wall,
 "cgroup_peak_bytes": ${peak:-null}, "cgroup_pgmajfault": ${pgmaj:-null}, "cgroup_oom_kill": ${oom:-null},
 "limit": "$LIMIT", "limit_mode": "$LIMIT_MODE", "drop": "$DROP_MODE", "store_fs": "$STORE_FS"}
JSON
}

# Cases in priority order (the budget cuts from the end).
ALL=(gpu-base gpu-release gpu-warmup cpu-base cpu-warmup gpu-release-warmup gpu-lock cpu-lock
     gpu-all gpu-warmup-sync cpu-warmup-sync)
flags_of() {
  case "$1" in
    *-base) ;;
    gpu-release) echo "--release-resident 1" ;;
    *-warmup) echo "--warmup-ram $WARMUP" ;;
    *-warmup-sync) echo "--warmup-ram $WARMUP --warmup-sync 1" ;;
    gpu-release-warmup) echo "--release-resident 1 --warmup-ram $WARMUP" ;;
    *-lock) echo "--lock-ram $LOCK" ;;
    gpu-all) echo "--release-resident 1 --lock-ram $LOCK --warmup-ram $WARMUP" ;;
  esac
}
for c in "${ALL[@]}"; do
  if [ -n "$CASES" ] && [[ ",$CASES," != *",$c,"* ]]; then continue; fi
  [ "${c%%-*}" = cpu ] && [ $DO_CPU = 0 ] && continue
  [ "${c%%-*}" = gpu ] && [ $DO_GPU = 0 ] && continue
  backend=cpu; [ "${c%%-*}" = gpu ] && backend=cuda
  # shellcheck disable=SC2046
  run_case "$c" "$backend" $(flags_of "$c")
done

# --- summary --------------------------------------------------------------------------------------
if [ $HAVE_PY = 0 ]; then
  log "python3 missing: no summary; raw results: $OUTDIR/*.json, *.err"
  exit 0
fi
timeout 60 python3 - "$OUTDIR" "$TMPFS" <<'PY'
import glob, json, os, sys
out, tmpfs = sys.argv[1], sys.argv[2] == "1"
rows = []
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
for meta_path in sorted(glob.glob(os.path.join(out, "*.meta.json")), key=os.path.getmtime):
    meta = load(meta_path) or {}
    name = meta.get("case", os.path.basename(meta_path)[:-10])
    row = dict(meta)
    rus = load(os.path.join(out, name + ".rusage.json")) or {}
    row["process_major_faults"] = rus.get("major_faults")
    row["process_max_rss_kb"] = rus.get("max_rss_kb")
    bench = load(os.path.join(out, name + ".json"))
    tokens_total = 0
    if bench:
        runs = bench.get("runs", [])
        for label, idx in (("first", 0), ("follow", 1)):
            if idx >= len(runs):
                continue
            d = runs[idx].get("workloads", {}).get("decode", {})
            n = d.get("token_records") or 0
            row[label + "_decode_tok_s"] = d.get("decode_tok_s")
            row[label + "_ttft_s"] = d.get("ttft_seconds")
            row[label + "_faults_per_token"] = (d.get("page_faults", 0) / n) if n else None
            if "major_page_faults" in d:
                row[label + "_major_per_token"] = (d["major_page_faults"] / n) if n else None
            row[label + "_prompt_faults"] = d.get("prompt_page_faults")
            if idx == 0:
                row["load_s"] = runs[idx].get("load_seconds")
            tokens_total += sum(r.get("decode_tokens", 0) for r in d.get("requests", []))
    if row.get("process_major_faults") is not None and tokens_total:
        row["process_major_faults_per_token"] = row["process_major_faults"] / tokens_total
    errp = os.path.join(out, name + ".err")
    if os.path.exists(errp):
        row["log"] = [l.strip() for l in open(errp, errors="replace")
                      if "--warmup-ram" in l or "--lock-ram" in l or "--release-resident" in l]
    rows.append(row)
json.dump({"schema": "neural-ram-residency", "version": 1, "store_on_tmpfs": tmpfs, "cases": rows},
          open(os.path.join(out, "summary.json"), "w"), indent=2)
def f(v, fmt="{:.2f}"):
    return "-" if v is None else fmt.format(v) if isinstance(v, (int, float)) else str(v)
lines = ["# RAM residency levers: " + ("STORE ON TMPFS (overhead only, see the script)" if tmpfs else "store on disk"),
         "",
         "Decode tok/s and page faults per decode token (soft + hard, from the bench's token records) of the "
         "first answer after loading (run 0) and of a follow-up (run 1); process major faults over the whole "
         "run (load, warm-up, both answers) per generated token; cgroup peak memory.",
         "",
         "| case | levers | rc | load s | first tok/s | follow-up tok/s | first TTFT s | faults/token first | faults/token follow-up | major/token first | major/token follow-up | major faults/token (run) | cgroup pgmajfault | peak GiB |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    if r.get("skipped"):
        lines.append("| {} | skipped: {} |".format(r["case"], r["skipped"]))
        continue
    peak = r.get("cgroup_peak_bytes")
    lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
        r["case"], r.get("levers") or "-", r.get("rc"), f(r.get("load_s"), "{:.1f}"),
        f(r.get("first_decode_tok_s")), f(r.get("follow_decode_tok_s")), f(r.get("first_ttft_s")),
        f(r.get("first_faults_per_token"), "{:.0f}"), f(r.get("follow_faults_per_token"), "{:.0f}"),
        f(r.get("first_major_per_token"), "{:.1f}"), f(r.get("follow_major_per_token"), "{:.1f}"),
        f(r.get("process_major_faults_per_token"), "{:.1f}"), f(r.get("cgroup_pgmajfault"), "{}"),
        f(peak / 2**30 if peak else None)))
lines.append("")
if any((r.get("process_major_faults") or 0) > 0 for r in rows) and not any(
        (r.get("first_major_per_token") or 0) > 0 or (r.get("follow_major_per_token") or 0) > 0 for r in rows):
    lines.append("Note: the token records carry no major faults (all 0) although the processes had some: "
                 "this build's ChatSession does not fill TokenRecord::major_page_faults yet; use the "
                 "per-run column.")
    lines.append("")
for r in rows:
    for l in r.get("log", []):
        lines.append("- {}: `{}`".format(r["case"], l.split("] ")[-1]))
if rows:
    lines.append("")
    lines.append("limit: {} ({}); caches: {}; store file system: {}".format(
        rows[0].get("limit"), rows[0].get("limit_mode"), rows[0].get("drop"), rows[0].get("store_fs")))
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
log "done in $(( $(date +%s) - T_START ))s: $OUTDIR/summary.md, $OUTDIR/summary.json"
