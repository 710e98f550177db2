#!/usr/bin/env bash
# Every `thread_local` in the project is trivially destructible: a pointer or a scalar. The
# Windows build (mingw-w64) may free a thread_local object's storage before running its
# destructor at thread exit, which corrupts the heap; per-thread objects with a destructor go
# through engine/platform/thread_scratch.h instead (docs/WINDOWS.md "thread_local").
#   check-thread-local.sh ROOT        check the C++ of ROOT (engine, host, server, gui, bench, tests)
#   check-thread-local.sh --self-test prove the check catches a vector and passes a pointer
set -euo pipefail
scan() {  # scan FILE...: prints offending lines as file:line: text; comments are ignored, except
          # the marker "// trivially destructible" after a struct-typed thread_local
  perl -e '
    while (<>) {
      my $marked = m{//\s*trivially destructible};
      s{//.*}{};
      if (/\bthread_local\b/ && !$marked) {
        my $ok = /\bthread_local\s+(?:static\s+)?(?:const\s+)?[\w:<>, ]+?\s*\*\s*(?:const\s+)?\w+\s*(?:=|;)/
              || /\bthread_local\s+(?:static\s+)?(?:const\s+)?(?:bool|char|int|unsigned|float|double|std::size_t|size_t|std::u?int(?:8|16|32|64)_t|CUresult)\s+\w+\s*(?:=|;|\{)/;
        print "$ARGV:$.: $_" unless $ok;
      }
    } continue { close ARGV if eof }' "$@"
}
if [ "${1:-}" = "--self-test" ]; then
  d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
  printf 'void f() {\n    thread_local std::vector<float> scores;\n}\n' > "$d/bad.cpp"
  printf 'thread_local std::string name = "x";\n' > "$d/bad2.h"
  printf '// thread_local std::vector<int> v; in a comment\nthread_local const Team* t_running = nullptr;\nthread_local int t_device = -1;\nthread_local std::vector<std::string>* t_ignored = nullptr;\n' > "$d/good.cpp"
  [ -n "$(scan "$d/bad.cpp")" ] || { echo "self-test: missed a vector"; exit 1; }
  [ -n "$(scan "$d/bad2.h")" ] || { echo "self-test: missed a string"; exit 1; }
  [ -z "$(scan "$d/good.cpp")" ] || { echo "self-test: flagged clean code: $(scan "$d/good.cpp")"; exit 1; }
  echo "check-thread-local self-test passed"
  exit 0
fi
ROOT=${1:?usage: check-thread-local.sh ROOT | --self-test}
mapfile -t files < <(cd "$ROOT" && find engine host server gui bench tests -path tests/server/clients -prune -o \
  \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.inl' \) -print 2>/dev/null | sed "s|^|$ROOT/|")
bad=$(scan "${files[@]}" | grep -v '/engine/platform/thread_scratch.h:' || true)
if [ -n "$bad" ]; then
  echo "check-thread-local: a thread_local with a destructor (use thread_scratch<T>(), engine/platform/thread_scratch.h):"
  echo "$bad"
  exit 1
fi
echo "check-thread-local: ${#files[@]} files, every thread_local trivially destructible"
