#!/usr/bin/env bash
# Fails when a file of the repository cites documentation that is not in it, so every citation
# in code comments, CMake, scripts and docs can be followed from a checkout:
#   - no file names the reference notes kept beside the repository (../shared/docs: the design
#     brief, the model and chat-format references, the reference design write-up); the facts the
#     code relies on are in docs/ (MODEL.md, CHAT_FORMAT.md, ARCHITECTURE.md, ...);
#   - every docs/PAGE.md a file names, and every relative .md link of a markdown page (with the
#     heading its #anchor names), exists.
# bench/workloads/ is left out: its request bodies quote source files as prompt text, frozen so
# that benchmark runs stay comparable.
# Usage: scripts/check-docs.sh [ROOT]   (default: this checkout)
#        scripts/check-docs.sh --self-test   (the check against a tree that must fail and one
#                                              that must pass)
set -euo pipefail

self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

if [ "${1:-}" = --self-test ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/docs" "$tmp/engine" "$tmp/bench/workloads"
  printf '# Model\n\nSee [the chat format](CHAT_FORMAT.md) and [its tokens](CHAT_FORMAT.md#the-tokens-o200k).\n' > "$tmp/docs/MODEL.md"
  printf '# Chat format\n\n## The tokens (o200k)\n' > "$tmp/docs/CHAT_FORMAT.md"
  printf '// Experts (docs/MODEL.md "Experts").\n' > "$tmp/engine/good.h"
  printf '{"content": "// see gpt-oss-model.md"}\n' > "$tmp/bench/workloads/w.json"
  "$self" "$tmp" > /dev/null || { echo "check-docs self-test: a clean tree was rejected" >&2; exit 1; }
  # Each of these must be found on its own.
  bad=('// the forward pass (gpt-oss-model.md section 4)'
       '# see ../shared/docs/harmony.md'
       '// the brief (DESIGN.md "Runtime")'
       '// the store (docs/NO_SUCH_PAGE.md)')
  for line in "${bad[@]}"; do
    printf '%s\n' "$line" > "$tmp/engine/bad.h"
    if "$self" "$tmp" > /dev/null 2>&1; then
      echo "check-docs self-test: not detected: $line" >&2
      exit 1
    fi
  done
  rm "$tmp/engine/bad.h"
  # A source file cited at a place it no longer is.
  printf '// the queue (host/queuewait.h)\n' > "$tmp/engine/moved.h"
  if "$self" "$tmp" > /dev/null 2>&1; then
    echo "check-docs self-test: a citation of a file that does not exist was not detected" >&2
    exit 1
  fi
  mkdir -p "$tmp/host" && : > "$tmp/host/queuewait.h"
  "$self" "$tmp" > /dev/null || { echo "check-docs self-test: an existing cited file was rejected" >&2; exit 1; }
  rm -r "$tmp/engine/moved.h" "$tmp/host"
  printf '# Model\n\nSee [the chat format](CHAT_FORMAT.md#no-such-heading).\n' > "$tmp/docs/MODEL.md"
  if "$self" "$tmp" > /dev/null 2>&1; then
    echo "check-docs self-test: a link to a missing heading was not detected" >&2
    exit 1
  fi
  printf '# Model\n\nSee [the store](STORE.md).\n' > "$tmp/docs/MODEL.md"
  if "$self" "$tmp" > /dev/null 2>&1; then
    echo "check-docs self-test: a broken markdown link was not detected" >&2
    exit 1
  fi
  echo "check-docs self-test: passed"
  exit 0
fi

root=${1:-$(dirname "$self")/..}
cd "$root"

# The repository's files: tracked and new ones from git where this is a checkout, else every
# file outside build and VCS folders.
if git rev-parse --is-inside-work-tree > /dev/null 2>&1 && [ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard)
else
  mapfile -t files < <(find . -type f -not -path './.git/*' -not -path './build*' \
                         -not -path './models/*' | sed 's|^\./||')
fi

me=scripts/check-docs.sh
list=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  case "$f" in
    bench/workloads/*|"$me") continue ;;
  esac
  list+=("$f")
done
[ ${#list[@]} -gt 0 ] || { echo "check-docs: no files found under $(pwd)" >&2; exit 1; }
problems=()

# Notes outside the repository (a page of that name inside docs/ would be the repository's own).
names=()
for name in DESIGN.md harmony.md gpt-oss-model.md reference-design.txt; do
  [ -e "docs/$name" ] || names+=(-e "$name")
done
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  problems+=("$file:${rest%%:*}: names a page outside the repository (cite docs/ instead): ${rest#*:}")
done < <(grep -IHnwF "${names[@]}" -e shared/docs -- "${list[@]}" | cut -c1-200 || true)

# Every docs/PAGE.md named anywhere exists.
while IFS= read -r hit; do
  page=${hit##*:}
  [ -e "$page" ] || problems+=("${hit%:*}: cites $page, which does not exist")
done < <(grep -IHnoE 'docs/[A-Za-z0-9_-]+\.md' -- "${list[@]}" || true)

# Every file of the repository named by its path (docs, comments, scripts) exists, so a file
# that moved cannot stay cited at its old place. #include lines are the compiler's business; a
# path may be rooted at the checkout or at engine/ (where the engine's includes are rooted);
# a generated file counts when its template (NAME.in) exists; npm's installed packages are not
# the repository's files.
roots='engine|gui|host|server|toolhost|scripts|tests|installer|cmake|bench|resources'
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  path=${rest#*:}
  path=${path#[^A-Za-z]}
  case "$path" in */node_modules/*) continue ;; esac  # installed by setup.sh, not a source file
  [ -e "$path" ] || [ -e "engine/$path" ] || [ -e "$path.in" ] ||
    problems+=("$file:$line: names $path, which does not exist (moved?)")
done < <(grep -IHnE "(^|[^A-Za-z0-9_./-])($roots)/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(h|cpp|cu|cuh|inl|sh|py|cmake|mjs|txt|json|md)" \
           -- "${list[@]}" | grep -vE '^[^:]+:[0-9]+:[[:space:]]*#[[:space:]]*include' |
         grep -oE "^[^:]+:[0-9]+:|(^|[^A-Za-z0-9_./-])($roots)/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(h|cpp|cu|cuh|inl|sh|py|cmake|mjs|txt|json|md)" |
         awk '/^[^:]+:[0-9]+:$/ {prefix=$0; next} {print prefix $0}' || true)

# The anchors GitHub gives the headings of a markdown page: lower case, punctuation dropped,
# spaces as hyphens.
anchors_of() {
  grep -E '^#{1,6} ' "$1" | sed -E 's/^#+ +//' | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}

# Every relative .md link of a markdown page exists, and so does the heading it points to.
md=()
for f in "${list[@]}"; do
  case "$f" in *.md) md+=("$f") ;; esac
done
if [ ${#md[@]} -gt 0 ]; then
  while IFS= read -r hit; do
    file=${hit%%:*}
    link=${hit#*:*:}
    target=${link#](}
    target=${target%)}
    anchor=
    case "$target" in *'#'*) anchor=${target#*#} ;; esac
    target=${target%%#*}
    path=$(dirname "$file")/$target
    if [ ! -e "$path" ]; then
      problems+=("${hit%:*}: links $target, which does not exist")
    elif [ -n "$anchor" ] && ! anchors_of "$path" | grep -qxF -- "$anchor"; then
      problems+=("${hit%:*}: links $target#$anchor, but $target has no such heading")
    fi
  done < <(grep -IHnoE '\]\([A-Za-z0-9_./-]+\.md(#[^)]*)?\)' -- "${md[@]}" || true)
fi

if [ ${#problems[@]} -gt 0 ]; then
  printf 'check-docs: %s\n' "${problems[@]}" >&2
  echo "check-docs: ${#problems[@]} citation(s) to fix" >&2
  exit 1
fi
echo "check-docs: ${#list[@]} files cite only pages of the repository"
