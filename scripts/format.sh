#!/usr/bin/env bash
# Applies .clang-format to every tracked C++ and CUDA file, or checks that they follow it.
#   scripts/format.sh            rewrite the files in place
#   scripts/format.sh --check    list the files that differ and fail (ctest docs.format)
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
[ -n "$CF" ] || { echo "format: clang-format not installed (scripts/setup.sh installs clang-format-14)" >&2; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' '*.inl')
else  # a source tree without .git: the same folders
  mapfile -t files < <(find engine gui host server toolhost tests bench -type f \
    \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.inl' \) 2>/dev/null | sort)
fi
if [ "${1:-}" = --check ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$CF" --dry-run -Werror "$f" >/dev/null 2>&1; then echo "format: $f differs from .clang-format"; bad=1; fi
  done
  [ $bad = 0 ] && echo "format: ${#files[@]} files follow .clang-format"
  exit $bad
fi
"$CF" -i "${files[@]}"
