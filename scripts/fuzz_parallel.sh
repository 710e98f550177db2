#!/usr/bin/env bash
# Runs every libFuzzer target at once, each in libFuzzer's fork mode with JOBS_PER_TARGET worker
# processes, for SECONDS, and writes per-target and overall summaries (docs/RELIABILITY.md, "One
# CPU-hour per target"). Made for a many-core machine without clang: it runs the bundle of
# scripts/fuzz_bundle.sh; here it can also run build-fuzz/ directly.
#   scripts/fuzz_parallel.sh SECONDS JOBS_PER_TARGET OUTDIR
# Paths are relative to the repository root (the script cd's there; OUTDIR may be absolute).
#
# Environment:
#   NEURAL_FUZZ_RESUME   a state archive (state.tar.xz of an earlier run, or
#                        .devwork/fuzz/state-local.tar.xz) or an earlier OUTDIR: its corpora,
#                        crash inputs and run history are taken over, so CPU time adds up across
#                        runs. Rerunning into the same OUTDIR also continues it.
#   NEURAL_FUZZ_EXPORT   a folder that receives the four files worth carrying back (flat, no
#                        subfolders): summary.json, summary.md, state.tar.xz (the corpora, every
#                        crash input and the history: the next run's NEURAL_FUZZ_RESUME),
#                        logs.tar.xz (the fuzzer logs and the crash replays)
#   NEURAL_FUZZ_BUNDLE   bundle archive (default .devwork/fuzz/bundle.tar.xz); unpacked once to
#                        NEURAL_FUZZ_UNPACK (default ${TMPDIR:-/tmp}/neural-fuzz-bundle)
#   NEURAL_FUZZ_BIN_DIR  run these fuzz_<target> binaries instead of a bundle (local runs:
#                        build-fuzz/tests/fuzz; default when no bundle archive exists)
#   NEURAL_FUZZ_TARGETS  space-separated subset (default: every folder of tests/fuzz/corpus)
#   NEURAL_FUZZ_NICE     niceness of the fuzzers (default 0; 19 on a shared machine)
#   NEURAL_FUZZ_TIMEOUT  libFuzzer -timeout, seconds per input (default 30)
#   NEURAL_FUZZ_TOKENIZER  tokenizer.json (default: the bundle's, else the shared fixture's)
#
# Each target: OUTDIR/<target>/corpus (the main corpus: libFuzzer's fork mode merges every
# worker's new inputs into it; the seeds in tests/fuzz/corpus/<target> are read, never written),
# artifacts/ (crash-*, timeout-*, oom-*, leak-* inputs; -ignore_crashes=1, so a crash is
# recorded and fuzzing goes on), fuzz.log, crashes/<artifact>.txt (each crash input replayed
# once, with its stack trace), summary.json and summary.md. OUTDIR/summary.{json,md} has every
# target: this run's CPU seconds (user + system of the fuzzer and all its workers), executions,
# cov, ft, corpus files and bytes, crash inputs, and the totals over the runs in the history.
# Exit status: 0, or 1 when any target has a crash input (crash-*/leak-*, new or carried over);
# timeout-/oom- inputs are replayed and listed but do not fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
if [ $# -ne 3 ]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
SECONDS_RUN=$1
JOBS=$2
OUTDIR=$3
[[ $SECONDS_RUN =~ ^[0-9]+$ && $JOBS =~ ^[0-9]+$ && $JOBS -ge 1 ]] ||
  { echo "fuzz_parallel: SECONDS and JOBS_PER_TARGET must be positive integers" >&2; exit 2; }
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
TARGETS=${NEURAL_FUZZ_TARGETS:-$(cd tests/fuzz/corpus && ls)}
NICE=${NEURAL_FUZZ_NICE:-0}
TIMEOUT=${NEURAL_FUZZ_TIMEOUT:-30}   # libFuzzer -timeout: seconds per input
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)

# --- binaries and libraries ---------------------------------------------------------------------
BUNDLE=${NEURAL_FUZZ_BUNDLE:-.devwork/fuzz/bundle.tar.xz}
LIBS=""
if [ -n "${NEURAL_FUZZ_BIN_DIR:-}" ] || [ ! -f "$BUNDLE" ]; then
  BIN_DIR=${NEURAL_FUZZ_BIN_DIR:-build-fuzz/tests/fuzz}
  SHARED=${NEURAL_SHARED_DIR:-$(cd .. && pwd)/shared}
  TOKENIZER=${NEURAL_FUZZ_TOKENIZER:-$SHARED/fixtures/tiny-gptoss-a/tokenizer.json}
  SOURCE="binaries in $BIN_DIR"
else
  UNPACK=${NEURAL_FUZZ_UNPACK:-${TMPDIR:-/tmp}/neural-fuzz-bundle}
  stamp=$(stat -c '%s %Y' "$BUNDLE")
  if [ "$(cat "$UNPACK/.stamp" 2>/dev/null || true)" != "$stamp" ]; then
    rm -rf "$UNPACK" && mkdir -p "$UNPACK"
    xz -dc "$BUNDLE" | tar -C "$UNPACK" -xf -
    echo "$stamp" >"$UNPACK/.stamp"
  fi
  BIN_DIR=$UNPACK/bin
  LIBS=$UNPACK/lib
  TOKENIZER=${NEURAL_FUZZ_TOKENIZER:-$UNPACK/tokenizer.json}
  SOURCE="bundle $BUNDLE ($(head -1 "$UNPACK/MANIFEST"))"
fi
# The project's packaged libraries (.devdeps/debs), unpacked beside the bundle, never over /:
# the bundle carries its own copies, these only fill in if one is missing.
if [ -d .devdeps/debs ] && [ -n "$LIBS" ] && command -v dpkg >/dev/null 2>&1; then
  DEBS=${UNPACK}-debs
  if [ ! -d "$DEBS" ]; then
    mkdir -p "$DEBS"
    for f in .devdeps/debs/*.deb; do dpkg -x "$f" "$DEBS"; done
  fi
  LIBS=$LIBS:$DEBS/usr/lib/x86_64-linux-gnu:$DEBS/lib/x86_64-linux-gnu
fi
[ -z "$LIBS" ] || export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -f "$TOKENIZER" ] || { echo "fuzz_parallel: tokenizer $TOKENIZER not found" >&2; exit 2; }
export NEURAL_FUZZ_TOKENIZER=$TOKENIZER
# addr2line (binutils) symbolizes stack traces when llvm-symbolizer is absent: the bundle's
# binaries keep their symbol tables, so frames get function names (no file:line; the unstripped
# binaries are in .devwork/fuzz-debug/ where the bundle was made).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allow_addr2line=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in $TARGETS; do
  [ -x "$BIN_DIR/fuzz_$t" ] || { echo "fuzz_parallel: $BIN_DIR/fuzz_$t missing" >&2; exit 2; }
  if ldd "$BIN_DIR/fuzz_$t" | grep 'not found' >&2; then
    echo "fuzz_parallel: fuzz_$t cannot load a library (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})" >&2
    exit 2
  fi
done

# --- resume -------------------------------------------------------------------------------------
HISTORY=$OUTDIR/history.tsv   # run target seconds jobs cpu_s execs cov ft corpus_files crashes
touch "$HISTORY"
if [ -n "${NEURAL_FUZZ_RESUME:-}" ]; then
  src=$NEURAL_FUZZ_RESUME
  if [ -f "$src" ]; then
    tmp=$OUTDIR/.resume
    rm -rf "$tmp" && mkdir -p "$tmp"
    xz -dc "$src" | tar -C "$tmp" -xf -
    src=$tmp/state
  fi
  [ -d "$src" ] || { echo "fuzz_parallel: NEURAL_FUZZ_RESUME=$NEURAL_FUZZ_RESUME not found" >&2; exit 2; }
  if [ "$(cd "$src" && pwd)" != "$OUTDIR" ]; then
    for t in $TARGETS; do
      for d in corpus artifacts; do
        if [ -d "$src/$t/$d" ]; then
          mkdir -p "$OUTDIR/$t/$d"
          # names are content hashes (seeds: fixed names): a name present twice is the same input
          find "$src/$t/$d" -maxdepth 1 -type f -exec cp -t "$OUTDIR/$t/$d/" {} +
        fi
      done
    done
    # history lines not already here (resuming twice from the same state adds nothing twice)
    [ -f "$src/history.tsv" ] && { grep -v -x -F -f "$HISTORY" "$src/history.tsv" >>"$HISTORY" || true; }
  fi
  rm -rf "$OUTDIR/.resume"
fi

# --- run ----------------------------------------------------------------------------------------
echo "fuzz_parallel: $(echo $TARGETS | wc -w) targets x $JOBS workers for ${SECONDS_RUN}s," \
  "$(nproc) CPUs; $SOURCE; out $OUTDIR"
for t in $TARGETS; do
  d=$OUTDIR/$t
  mkdir -p "$d/corpus" "$d/artifacts" "$d/crashes"
  find "$d/artifacts" -maxdepth 1 -type f -printf '%f\n' | sort >"$d/artifacts.before"
  (
    # fork mode: JOBS child processes fuzz in turn-limited jobs (up to 300 s each) and the parent
    # merges their new inputs into the first corpus folder; crash/timeout/oom inputs go to
    # -artifact_prefix and the run goes on (-ignore_crashes=1; timeouts and ooms are ignored by
    # default in fork mode, counted in the log's oom/timeout/crash figures).
    nice -n "$NICE" "$BIN_DIR/fuzz_$t" -fork="$JOBS" -ignore_crashes=1 \
      -max_total_time="$SECONDS_RUN" -print_final_stats=1 -timeout="$TIMEOUT" -rss_limit_mb=4096 \
      -max_len=65536 -artifact_prefix="$d/artifacts/" "$d/corpus" "tests/fuzz/corpus/$t" \
      >"$d/fuzz.log" 2>&1 || echo "exit status $?" >>"$d/fuzz.log"
    # CPU time of this subshell's waited-for descendants: the fuzzer, its workers, their
    # children (second line of `times`; not in a pipeline, which would be a subshell of its own)
    times >"$d/cpu.txt"
    # Coverage of the final corpus, measured alike for every run (fork mode's own status line
    # adds up its workers' features, and its cov equals ft): one pass over the corpus, no
    # mutations; libFuzzer's "INITED cov: C ft: F" line.
    timeout 120 nice -n "$NICE" "$BIN_DIR/fuzz_$t" -runs=0 -timeout="$TIMEOUT" -rss_limit_mb=4096 \
      -max_len=65536 "$d/corpus" >"$d/coverage.log" 2>&1 || true
  ) &
done
wait

# --- summaries ----------------------------------------------------------------------------------
secs() {  # "1m2.500s" -> 62.5
  echo "$1" | awk -F'm' '{sub(/s$/, "", $2); printf "%.1f", $1 * 60 + $2}'
}
json_str() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
status=0
all_json=()
md_rows=()
head='| target | seconds | workers | CPU s | executions | cov | ft | corpus files (KiB) | crash inputs | timeout/oom inputs | runs | total CPU s | total executions |'
sep='|---|---|---|---|---|---|---|---|---|---|---|---|---|'
list_json() { for a in "$@"; do json_str "$a"; echo; done | paste -sd, -; }
for t in $TARGETS; do
  d=$OUTDIR/$t
  read -r u s < <(sed -n 2p "$d/cpu.txt")
  cpu=$(awk -v a="$(secs "$u")" -v b="$(secs "$s")" 'BEGIN {printf "%.1f", a + b}')
  # fork mode's status lines: "#EXECS: cov: C ft: F corp: N exec/s E oom/timeout/crash: a/b/c
  # time: Ts job: J dft_time: D"; EXECS adds up the finished worker jobs.
  last=$(grep -E '^#[0-9]+: cov:' "$d/fuzz.log" | tail -1 || true)
  execs=$(echo "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')
  otc=$(echo "$last" | sed -n 's|.*oom/timeout/crash: \([0-9/]*\).*|\1|p')
  jobs_done=$(echo "$last" | sed -n 's/.* job: \([0-9]*\).*/\1/p')
  # cov/ft: the final corpus replayed once (coverage.log), comparable between runs
  inited=$(grep -E '^#[0-9]+[[:space:]]+INITED' "$d/coverage.log" | tail -1 || true)
  cov=$(echo "$inited" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$inited" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
  files=$(find "$d/corpus" -maxdepth 1 -type f | wc -l)
  bytes=$(du -sb "$d/corpus" | cut -f1)
  find "$d/artifacts" -maxdepth 1 -type f -printf '%f\n' | sort >"$d/artifacts.after"
  new=$(comm -13 "$d/artifacts.before" "$d/artifacts.after")
  rm -f "$d/artifacts.before"
  # crash-*, leak-*, (deadly-signal) count as crashes; timeout-*, oom-*, slow-unit-* are
  # resource findings, replayed and reported but not failing the run.
  crashes=$(grep -v -E '^(timeout|oom|slow-unit)-' "$d/artifacts.after" || true)
  slow=$(grep -E '^(timeout|oom|slow-unit)-' "$d/artifacts.after" || true)
  rm -f "$d/artifacts.after"
  # Replay each input once (stack trace for the report; a timeout gets 4x the time limit).
  for a in $crashes $slow; do
    [ -f "$d/crashes/$a.txt" ] ||
      timeout $((TIMEOUT * 4 + 60)) "$BIN_DIR/fuzz_$t" -runs=1 -timeout=$((TIMEOUT * 4)) \
        -rss_limit_mb=4096 "$d/artifacts/$a" >"$d/crashes/$a.txt" 2>&1 || true
  done
  ncrash=$(echo $crashes | wc -w)
  nslow=$(echo $slow | wc -w)
  [ "$ncrash" -eq 0 ] || status=1
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$RUN_ID" "$t" "$SECONDS_RUN" "$JOBS" "$cpu" \
    "${execs:-0}" "${cov:-}" "${ft:-}" "$files" "$(echo $new | wc -w)" >>"$HISTORY"
  tot_cpu=$(awk -F'\t' -v t="$t" '$2 == t {c += $5} END {printf "%.1f", c}' "$HISTORY")
  tot_execs=$(awk -F'\t' -v t="$t" '$2 == t {e += $6} END {printf "%d", e}' "$HISTORY")
  runs=$(awk -F'\t' -v t="$t" '$2 == t {n++} END {print n + 0}' "$HISTORY")
  json=$(printf '{"target": "%s", "run": "%s", "seconds": %s, "jobs": %s, "cpu_seconds": %s, "executions": %s, "cov": %s, "ft": %s, "log_oom_timeout_crash": "%s", "fork_jobs": %s, "corpus_files": %s, "corpus_bytes": %s, "crash_inputs": [%s], "timeout_oom_inputs": [%s], "new_artifacts_this_run": [%s], "total_runs": %s, "total_cpu_seconds": %s, "total_executions": %s}' \
    "$t" "$RUN_ID" "$SECONDS_RUN" "$JOBS" "$cpu" "${execs:-0}" "${cov:-null}" "${ft:-null}" \
    "${otc:-}" "${jobs_done:-0}" "$files" "$bytes" "$(list_json $crashes)" "$(list_json $slow)" \
    "$(list_json $new)" "$runs" "$tot_cpu" "$tot_execs")
  echo "$json" >"$d/summary.json"
  row="| $t | $SECONDS_RUN | $JOBS | $cpu | ${execs:-?} | ${cov:-?} | ${ft:-?} | $files ($((bytes / 1024))) | $ncrash | $nslow | $runs | $tot_cpu | $tot_execs |"
  {
    printf '# fuzz_%s, run %s\n\n%s\n%s\n%s\n' "$t" "$RUN_ID" "$head" "$sep" "$row"
    echo
    echo "libFuzzer's fork-mode counters (last status line): oom/timeout/crash ${otc:-?}, ${jobs_done:-?} worker jobs."
    for a in $crashes $slow; do
      case " $new " in *" $a "*) when="new in this run" ;; *) when="carried over" ;; esac
      printf '\n## %s (%s)\n\n```\n%s\n```\n' "$a" "$when" \
        "$(grep -m12 -E 'ERROR|runtime error|SUMMARY|#[0-9]+ 0x|Slowest|timeout|out-of-memory' "$d/crashes/$a.txt" || echo '(the replay did not fail)')"
    done
  } >"$d/summary.md"
  all_json+=("$json")
  md_rows+=("$row")
done
{
  printf '{"run": "%s", "seconds": %s, "jobs_per_target": %s, "cpus": %s, "source": %s, "targets": [\n' \
    "$RUN_ID" "$SECONDS_RUN" "$JOBS" "$(nproc)" "$(json_str "$SOURCE")"
  (IFS=$'\n'; echo "${all_json[*]}") | sed '$!s/$/,/'
  echo ']}'
} >"$OUTDIR/summary.json"
{
  echo "# Fuzzing run $RUN_ID: ${SECONDS_RUN}s, $JOBS workers per target, $(nproc) CPUs"
  echo
  echo "$SOURCE. CPU s: user + system of the fuzzer and all its workers. Executions: libFuzzer"
  echo "fork mode's count (finished worker jobs). cov/ft: one replay of the final corpus (INITED"
  echo "line). Crash inputs: crash-/leak- files in artifacts/ (every run so far); timeout/oom: the"
  echo "resource ones. Totals: every run in history.tsv (a resumed run adds to them)."
  echo
  echo "$head"
  echo "$sep"
  printf '%s\n' "${md_rows[@]}"
  for t in $TARGETS; do
    if grep -q '^## ' "$OUTDIR/$t/summary.md"; then
      echo; echo "## $t: crash, timeout and oom inputs"
      sed -n '/^## /,$p' "$OUTDIR/$t/summary.md" | sed 's/^## /### /'
    fi
  done
} >"$OUTDIR/summary.md"

# --- compact state for carrying -----------------------------------------------------------------
stage=$OUTDIR/.stage
rm -rf "$stage" && mkdir -p "$stage/state" "$stage/logs"
cp "$HISTORY" "$stage/state/history.tsv"
for t in $TARGETS; do
  mkdir -p "$stage/state/$t" "$stage/logs/$t"
  ln -s "$OUTDIR/$t/corpus" "$stage/state/$t/corpus"
  ln -s "$OUTDIR/$t/artifacts" "$stage/state/$t/artifacts"
  cp "$OUTDIR/$t/fuzz.log" "$stage/logs/$t/"
  find "$OUTDIR/$t/crashes" -maxdepth 1 -type f -exec cp -t "$stage/logs/$t/" {} +
done
tar -C "$stage" -chf - state | xz -T0 -6 >"$OUTDIR/state.tar.xz"
tar -C "$stage" -chf - logs | xz -T0 -6 >"$OUTDIR/logs.tar.xz"
rm -rf "$stage"
if [ -n "${NEURAL_FUZZ_EXPORT:-}" ]; then
  mkdir -p "$NEURAL_FUZZ_EXPORT"
  cp "$OUTDIR/summary.json" "$OUTDIR/summary.md" "$OUTDIR/state.tar.xz" "$OUTDIR/logs.tar.xz" \
    "$NEURAL_FUZZ_EXPORT/"
fi
cat "$OUTDIR/summary.md"
echo
echo "fuzz_parallel: state $OUTDIR/state.tar.xz ($(($(stat -c %s "$OUTDIR/state.tar.xz") / 1024)) KiB)," \
  "logs $OUTDIR/logs.tar.xz ($(($(stat -c %s "$OUTDIR/logs.tar.xz") / 1024)) KiB)"
exit $status
