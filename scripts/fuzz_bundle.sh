#!/usr/bin/env bash
# Builds the libFuzzer targets (scripts/fuzz.sh --build-only: clang 14, build-fuzz/) and packs a
# self-contained bundle for a machine without clang or the project's libraries
# (docs/RELIABILITY.md, "One CPU-hour per target"):
#   .devwork/fuzz/bundle.tar.xz   bin/fuzz_<target> (8 binaries, debug info stripped, symbols
#                                 kept), lib/ (every shared library they load except glibc,
#                                 libstdc++ and libgcc_s: libomp, spdlog, fmt, pcre2, xxhash, Qt 6
#                                 and ICU for server_head, ...), tokenizer.json (the targets'
#                                 NEURAL_FUZZ_TOKENIZER), MANIFEST (build ids, sizes, sources)
#   .devwork/fuzz/state-local.tar.xz  the corpus grown by earlier local runs
#                                 (build-fuzz/fuzz-corpus), in scripts/fuzz_parallel.sh's state
#                                 format: a run can start from it (NEURAL_FUZZ_RESUME)
#   .devwork/fuzz-debug/          the unstripped binaries (not for carrying): symbolize a remote
#                                 stack trace's module+offset with
#                                 `addr2line -f -C -e .devwork/fuzz-debug/fuzz_T 0xOFFSET`
# .devwork/ is ignored by git (.git/info/exclude). The seed corpora (tests/fuzz/corpus) travel
# with the working tree. scripts/fuzz_parallel.sh unpacks and runs the bundle.
#   scripts/fuzz_bundle.sh
#   NEURAL_SHARED_DIR  fixtures (default ../shared): the tokenizer comes from
#                      fixtures/tiny-gptoss-a/tokenizer.json
#   NEURAL_FUZZ_BUNDLE_MAX_MIB  fail when the bundle is larger (default 40)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${NEURAL_FUZZ_BUILD_DIR:-build-fuzz}
SHARED=${NEURAL_SHARED_DIR:-$(cd .. && pwd)/shared}
TOKENIZER=$SHARED/fixtures/tiny-gptoss-a/tokenizer.json
MAX_MIB=${NEURAL_FUZZ_BUNDLE_MAX_MIB:-40}
[ -f "$TOKENIZER" ] || { echo "fuzz_bundle: $TOKENIZER not found" >&2; exit 2; }

NEURAL_FUZZ_BUILD_DIR=$BUILD_DIR scripts/fuzz.sh --build-only

TARGETS=$(cd tests/fuzz/corpus && ls)
DEST=.devwork/fuzz
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/neural-fuzz-bundle.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib" "$DEST" .devwork/fuzz-debug

# glibc (any x86-64 Linux has one at least as new: the binaries need GLIBC_2.34 or older symbols,
# checked below) and the GCC runtime (libstdc++ >= GCC 12's on the target) stay with the system.
system_lib='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libutil|libstdc\+\+|libgcc_s)'
for t in $TARGETS; do
  bin=$BUILD_DIR/tests/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz_bundle: $bin was not built" >&2; exit 1; }
  cp "$bin" .devwork/fuzz-debug/
  objcopy --strip-debug "$bin" "$STAGE/bin/fuzz_$t"
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    if [[ ! $name =~ $system_lib ]] && [ ! -f "$STAGE/lib/$name" ]; then
      cp -L "$path" "$STAGE/lib/$name"
    fi
  done
done
if ldd "$BUILD_DIR"/tests/fuzz/fuzz_* 2>/dev/null | grep -q 'not found'; then
  echo "fuzz_bundle: a library is missing here (ldd says 'not found')" >&2; exit 1
fi
strip --strip-debug "$STAGE"/lib/*
cp "$TOKENIZER" "$STAGE/tokenizer.json"

# The newest glibc symbol version any file needs (the target machine must have at least this).
glibc=$(for f in "$STAGE"/bin/* "$STAGE"/lib/*; do objdump -T "$f" 2>/dev/null; done |
  grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n -u | tail -1)
{
  echo "neural fuzz bundle, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- engine server tests/fuzz || echo ' (+ uncommitted changes)')"
  echo "compiler: $("${NEURAL_FUZZ_CXX:-clang++-14}" --version | head -1)"
  echo "needs: x86-64 Linux, $glibc or newer, libstdc++ with GLIBCXX_3.4.30 (GCC 12) or newer"
  echo "tokenizer: $TOKENIZER ($(sha256sum "$TOKENIZER" | cut -c1-16))"
  echo "binaries (build id, bytes):"
  for f in "$STAGE"/bin/*; do
    echo "  $(basename "$f") $(readelf -n "$f" | awk '/Build ID/ {print $3}') $(stat -c %s "$f")"
  done
  echo "libraries (bytes):"
  for f in "$STAGE"/lib/*; do echo "  $(basename "$f") $(stat -c %s "$f")"; done
} >"$STAGE/MANIFEST"

tar -C "$STAGE" -cf - MANIFEST bin lib tokenizer.json | xz -T2 -6 >"$DEST/bundle.tar.xz.tmp"
mv "$DEST/bundle.tar.xz.tmp" "$DEST/bundle.tar.xz"
cp "$STAGE/MANIFEST" "$DEST/MANIFEST"

# The local corpus as a state archive (state/<target>/corpus/*), see scripts/fuzz_parallel.sh.
if [ -d "$BUILD_DIR/fuzz-corpus" ]; then
  rm -rf "$STAGE/state"
  for t in $TARGETS; do
    mkdir -p "$STAGE/state/$t/corpus"
    [ -d "$BUILD_DIR/fuzz-corpus/$t" ] && find "$BUILD_DIR/fuzz-corpus/$t" -maxdepth 1 -type f \
      -exec cp -t "$STAGE/state/$t/corpus/" {} +
  done
  : >"$STAGE/state/history.tsv"
  tar -C "$STAGE" -cf - state | xz -T2 -6 >"$DEST/state-local.tar.xz"
fi

raw=$(du -sb "$STAGE" --exclude=state | cut -f1)
packed=$(stat -c %s "$DEST/bundle.tar.xz")
echo "fuzz_bundle: $DEST/bundle.tar.xz $((packed / 1024)) KiB ($((raw / 1024 / 1024)) MiB unpacked), $glibc"
[ -f "$DEST/state-local.tar.xz" ] &&
  echo "fuzz_bundle: $DEST/state-local.tar.xz $(($(stat -c %s "$DEST/state-local.tar.xz") / 1024)) KiB"
if [ "$packed" -gt $((MAX_MIB * 1024 * 1024)) ]; then
  echo "fuzz_bundle: the bundle is over $MAX_MIB MiB" >&2; exit 1
fi
