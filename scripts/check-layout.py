#!/usr/bin/env python3
"""Fails when an #include runs from a lower floor of the house to a higher one, or when folders
include each other in a loop (docs/ARCHITECTURE.md "Floors").

The floors are the table between the `floors:begin` and `floors:end` markers of
docs/ARCHITECTURE.md, the highest floor first; folders on one row share a floor. Every C++/CUDA
file under a top folder the table names (engine/, host/, ...) belongs to the deepest folder of the
table that holds it, and must belong to one. An `#include "..."` is resolved as the compiler does:
beside the including file, then in the include folders the CMake targets declare (kIncludeRoots);
an include that resolves to no file of the tree (a system header, a generated one) is left out.
Then:
  - a file may include files of its own folder, of folders on its floor and of lower floors;
    an include of a higher floor is a back-arrow;
  - the folders' include graph has no loop (two folders of one floor including each other);
  - nor has the graph of every folder at any depth, each file in its own folder: a folder and
    its sub-folder (engine/cpu/ and engine/cpu/kernels/), or two sub-folders (gui/app/ and
    gui/settings/), never include each other, directly or around a longer loop.
The table between `layout-allow:begin` and `layout-allow:end` lists back-arrows that are known
and kept for now, one `from` file and included file a row, each with its reason; an entry that no
longer matches an include fails too, so the list only shrinks.

Usage: scripts/check-layout.py [ROOT]      check the tree at ROOT (default: this checkout)
       scripts/check-layout.py --list [ROOT]  also print the folders' include graph
       scripts/check-layout.py --self-test    the check against planted back-arrows and loops
"""

import os
import re
import sys
import tempfile

# Include folders of the CMake targets (target_include_directories in engine/, host/, server/,
# gui/, toolhost/ and toolhost/mcp/): `#include "runtime/model.h"` means engine/runtime/model.h.
kIncludeRoots = ["engine", "engine/include", "host", "server", "gui", "toolhost", "toolhost/mcp"]
# The self-test's tree: its own top folder, so its made-up paths are not cited as files of the
# repository (scripts/check-docs.sh checks those).
kSelfTestRoots = ["core", "core/include"]
kSourceExt = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inl", ".inc")
kInclude = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
kFolder = re.compile(r"`([^`]+?)/?`")


def read_table(text, name):
    """Rows (lists of cells) of the markdown table between <!-- NAME:begin --> and :end."""
    m = re.search(r"<!--\s*%s:begin\s*-->(.*?)<!--\s*%s:end\s*-->" % (name, name), text, re.S)
    if not m:
        return None
    rows = []
    for line in m.group(1).splitlines():
        line = line.strip()
        if not line.startswith("|") or re.match(r"^\|[\s|:-]+\|$", line):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append(cells)
    return rows[1:] if rows else rows  # the first row is the header


def load_floors(root):
    path = os.path.join(root, "docs", "ARCHITECTURE.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    rows = read_table(text, "floors")
    if not rows:
        raise SystemExit("check-layout: docs/ARCHITECTURE.md has no floors:begin/end table")
    floors = {}  # folder -> floor (0: the lowest)
    for i, cells in enumerate(rows):
        folders = kFolder.findall(cells[0])
        if not folders:
            raise SystemExit("check-layout: a floors row names no `folder/`: | %s |" % " | ".join(cells))
        for d in folders:
            if d in floors:
                raise SystemExit("check-layout: %s/ is on two floors" % d)
            floors[d] = len(rows) - 1 - i
    allow = []
    for cells in read_table(text, "layout-allow") or []:
        names = re.findall(r"`([^`]+)`", " ".join(cells[:2]))
        if len(cells) < 3 or len(names) != 2 or not cells[2]:
            raise SystemExit("check-layout: an allow-list row needs `from`, `included` and a "
                             "reason: | %s |" % " | ".join(cells))
        allow.append((names[0], names[1]))
    return floors, allow


def folder_of(path, floors):
    """The deepest folder of the table that holds `path`, or None."""
    d = os.path.dirname(path)
    while d:
        if d in floors:
            return d
        d = os.path.dirname(d)
    return None


def source_files(root, tops):
    out = []
    for top in sorted(tops):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d != "node_modules" and not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith(kSourceExt):
                    out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return out


def resolve(root, including, name, roots):
    candidates = [os.path.join(os.path.dirname(including), name)]
    candidates += [os.path.join(r, name) for r in roots]
    for c in candidates:
        c = os.path.normpath(c).replace(os.sep, "/")
        if not c.startswith("..") and os.path.isfile(os.path.join(root, c)):
            return c
    return None


def strongly_connected(graph):
    """Tarjan: the components of more than one node."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(root, show_graph=False, roots=kIncludeRoots):
    """Returns the list of problems (empty: the layout holds)."""
    floors, allow = load_floors(root)
    tops = {d.split("/")[0] for d in floors}
    problems = []
    edges = {}  # (from folder, to folder) -> [example includes]
    dir_edges = {}  # the same between the files' own folders, at any depth
    used_allow = set()
    for f in source_files(root, tops):
        src = folder_of(f, floors)
        if src is None:
            problems.append("%s: in no folder of the floors table (docs/ARCHITECTURE.md)" % f)
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            lines = fh.readlines()
        for n, line in enumerate(lines, 1):
            m = kInclude.match(line)
            if not m:
                continue
            target = resolve(root, f, m.group(1), roots)
            if target is None:
                continue
            dst = folder_of(target, floors)
            if dst is None:
                continue
            if (f, target) in allow:
                used_allow.add((f, target))
                continue
            if os.path.dirname(f) != os.path.dirname(target):
                dir_edges.setdefault((os.path.dirname(f), os.path.dirname(target)), []).append(
                    "%s:%d -> %s" % (f, n, target))
            if dst == src:
                continue
            edges.setdefault((src, dst), []).append("%s -> %s" % (f, target))
            if floors[dst] > floors[src]:
                problems.append("%s:%d: back-arrow: %s/ (floor %d) includes %s (%s/, floor %d)"
                                % (f, n, src, floors[src], target, dst, floors[dst]))
    for entry in allow:
        if entry not in used_allow:
            problems.append("allow-list entry matches no include: %s -> %s (remove it)" % entry)
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    for comp in strongly_connected(graph):
        # The arrows that close the loop: those that do not go down a floor.
        inside = sorted((a, b) for (a, b) in edges
                        if a in comp and b in comp and floors[b] >= floors[a])
        detail = "; ".join("%s (%s)" % ("%s/ -> %s/" % ab, edges[ab][0]) for ab in inside)
        problems.append("loop between folders %s: %s" % (", ".join(d + "/" for d in comp), detail))
    dir_graph = {}
    for a, b in dir_edges:
        dir_graph.setdefault(a, set()).add(b)
    for comp in strongly_connected(dir_graph):
        # A loop the floors' folders do not show (sub-folders of one folder of the table) or
        # the same loop as above, named by the files' own folders.
        inside = sorted(ab for ab in dir_edges if ab[0] in comp and ab[1] in comp)
        detail = "; ".join("%s/ -> %s/ (%s)" % (a, b, dir_edges[(a, b)][0]) for a, b in inside)
        problems.append("loop between folders %s: %s" % (", ".join(d + "/" for d in comp), detail))
    if show_graph:
        for (a, b), v in sorted(edges.items()):
            print("%s/ (%d) -> %s/ (%d): %d includes" % (a, floors[a], b, floors[b], len(v)))
    return problems


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def self_test():
    def arch(allow_rows=""):
        return ("# Architecture\n\n<!-- floors:begin -->\n| floors, highest first | what |\n|---|---|\n"
                "| `app/` | the top |\n| `core/mid/` | the middle |\n"
                "| `core/low/`, `core/side/` | two folders on one floor |\n"
                "| `core/include/` | the ground |\n<!-- floors:end -->\n\n"
                "<!-- layout-allow:begin -->\n| from | includes | why |\n|---|---|---|\n"
                + allow_rows + "<!-- layout-allow:end -->\n")

    failures = []
    with tempfile.TemporaryDirectory() as root:
        write(root, "docs/ARCHITECTURE.md", arch())
        write(root, "core/include/neural/error.h", "#pragma once\n")
        write(root, "core/low/a.h", '#include "neural/error.h"\n#include <vector>\n')
        write(root, "core/low/a.cpp", '#include "low/a.h"\n#include "a.h"\n#include "side/b.h"\n')
        write(root, "core/side/b.h", '#include "neural/error.h"\n')
        write(root, "core/mid/m.h", '#include "low/a.h"\n#include "generated/version.h"\n')
        write(root, "app/main.cpp", '#include "mid/m.h"\n#include "side/b.h"\n')

        def expect(ok, what, word=""):
            problems = check(root, roots=kSelfTestRoots)
            if ok and problems:
                failures.append("%s: rejected: %s" % (what, problems))
            if not ok and not any(word in p for p in problems):
                failures.append("%s: not detected (%s)" % (what, problems))

        expect(True, "a clean tree")
        # A planted back-arrow: the low floor includes the middle one.
        write(root, "core/low/back.cpp", '#include "mid/m.h"\n')
        expect(False, "a back-arrow (core/low -> core/mid)", "back-arrow")
        # ... kept by an allow-list entry with a reason, then one that matches nothing.
        write(root, "docs/ARCHITECTURE.md", arch("| `core/low/back.cpp` | `core/mid/m.h` | kept |\n"))
        expect(True, "an allow-listed back-arrow")
        os.remove(os.path.join(root, "core/low/back.cpp"))
        expect(False, "a stale allow-list entry", "matches no include")
        write(root, "docs/ARCHITECTURE.md", arch("| `core/low/x.cpp` | `core/mid/m.h` | |\n"))
        try:
            check(root, roots=kSelfTestRoots)
            failures.append("an allow-list entry without a reason: accepted")
        except SystemExit:
            pass
        write(root, "docs/ARCHITECTURE.md", arch())
        # A planted loop between two folders of one floor.
        write(root, "core/side/loop.cpp", '#include "../low/a.h"\n')
        expect(False, "a loop (core/low <-> core/side)", "loop between folders")
        os.remove(os.path.join(root, "core/side/loop.cpp"))
        # A planted loop between a folder and its sub-folder (one floor of the table).
        write(root, "core/low/sub/s.h", '#include "low/a.h"\n')
        write(root, "core/low/uses_sub.cpp", '#include "low/sub/s.h"\n')
        expect(False, "a sub-folder loop (core/low <-> core/low/sub)", "loop between folders")
        # ... and between two sub-folders.
        os.remove(os.path.join(root, "core/low/uses_sub.cpp"))
        write(root, "core/low/sub2/t.h", '#include "low/sub/s.h"\n')
        write(root, "core/low/sub/uses_sub2.cpp", '#include "low/sub2/t.h"\n')
        expect(False, "a loop between sub-folders (core/low/sub <-> core/low/sub2)",
               "core/low/sub/, core/low/sub2/")
        for rel in ("core/low/sub/s.h", "core/low/sub/uses_sub2.cpp", "core/low/sub2/t.h"):
            os.remove(os.path.join(root, rel))
        # One-way includes between a folder and its sub-folder are fine.
        write(root, "core/low/sub/s.h", '#include "low/a.h"\n')
        expect(True, "a sub-folder that includes its parent folder, one way")
        os.remove(os.path.join(root, "core/low/sub/s.h"))
        # A file in no folder of the table.
        write(root, "core/stray/s.cpp", '#include "low/a.h"\n')
        expect(False, "a folder on no floor", "in no folder")
        os.remove(os.path.join(root, "core/stray/s.cpp"))
        expect(True, "the clean tree again")
    if failures:
        for f in failures:
            print("check-layout self-test: " + f, file=sys.stderr)
        return 1
    print("check-layout self-test: passed")
    return 0


def main(argv):
    if argv[:1] == ["--self-test"]:
        return self_test()
    show = argv[:1] == ["--list"]
    if show:
        argv = argv[1:]
    root = argv[0] if argv else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root, show)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print("check-layout: %d problem(s); the floors are in docs/ARCHITECTURE.md \"Floors\"" % len(problems),
              file=sys.stderr)
        return 1
    print("check-layout: every include runs down or level, no loop between folders")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
