#!/usr/bin/env python3
"""The include graph of src/: dependencies point one way.

Usage: check_layers.py [SRC_DIR]   (default: the src/ beside this tests/ folder)

Reads the `#include "..."` lines of every file under SRC_DIR, folds x.c and x.h into one
module (`node/service`), and fails (exit 1) on
  - an arrow from a lower layer to a higher one (core < store < node < cli),
  - a cycle between modules, within a folder or across folders,
  - a file outside the layer folders, or in a folder that is not a layer,
  - a public header (include/) that includes a file of src/: the ABI must stand alone,
  - an include that breaks a rule between node/'s sub-folders (NODE_RULES) or a cohortctl
    file that uses node/ beyond node/status/ (CLI_NODE_USES),
  - a pure module of store/ (STORE_PURE: document shaping, no I/O) that includes another
    module of store/ that is not pure, which would hide a circle of calls behind a header
    (runs.c's database calls live in nodes.c, which calls runs.c, never the other way),
printing each offence with the file and line that make it. When the graph is clean it
prints a short summary of the layers (modules, and the arrows between layers) and exits 0.

Invariants it keeps: the public handler ABI (`include/cohort/`, found beside SRC_DIR) may be
included by anyone and is not a node of the graph; an include it cannot resolve (a system
header written with quotes, a generated file) is named in a note and does not fail the
check, since only files under SRC_DIR can make a cycle or point upward.
Python 3 standard library only, so it runs wherever the tests do.
"""

import os
import re
import sys

LAYERS = ["core", "store", "node", "cli"]  # lowest first
RANK = {name: i for i, name in enumerate(LAYERS)}
SOURCE_SUFFIXES = (".c", ".h", ".inc", ".def")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
MAX_CYCLES_PER_GROUP = 20

# node/ by concept (docs/ARCHITECTURE.md): the process and its loop at the top of the folder,
# and one sub-folder per concept. The names of the rules' areas: "node" for the top, or
# "node/<sub-folder>".
NODE_AREAS = ["node", "node/primary", "node/work", "node/handler", "node/http", "node/status"]
# What each area must not include. status/ holds the read models cohortctl shares, so it
# stands on core and store alone; handler/ knows nothing of how tasks are claimed or led;
# work/ and primary/ know nothing of each other or of the HTTP edge; only the process
# (node/node) starts the HTTP edge.
NODE_RULES = {
    "node/status": {"node", "node/primary", "node/work", "node/handler", "node/http"},
    "node/handler": {"node/primary", "node/work", "node/http", "node/status"},
    "node/primary": {"node/work", "node/http"},
    "node/work": {"node/primary", "node/http"},
}
HTTP_STARTED_BY = {"node/node"}
# The front ends: cohortd (the daemon's main) runs the node; every other file of cli/ is
# cohortctl, which shares node/'s read models and nothing else of node/.
CLI_DAEMON = {"cli/cohortd"}
CLI_NODE_USES = {"node/status"}
# store/'s pure modules: they shape and read documents and call no database function, so
# they include only each other (and core/). nodes.c calls runs.c; runs.c calls nothing back.
STORE_PURE = {"store/doc", "store/runs"}


def module_of(relpath):
    """`node/service.c` and `node/service.h` are one module, `node/service`."""
    return os.path.splitext(relpath)[0].replace(os.sep, "/")


def layer_of(module):
    return module.split("/", 1)[0] if "/" in module else None


def area_of(module):
    """`node/work/task` is in area node/work; `node/service` in node; others in their layer."""
    parts = module.split("/")
    if parts[0] == "node" and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def source_files(src):
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                path = os.path.join(root, name)
                yield os.path.relpath(path, src)


def resolve(src, public, including, target):
    """The file an include names, as ("src", relpath), ("public", path) or None.

    The compiler's order for quoted includes: the including file's folder first, then the
    include path (src/ and include/)."""
    here = os.path.normpath(os.path.join(src, os.path.dirname(including), target))
    if os.path.isfile(here) and not os.path.relpath(here, src).startswith(".."):
        return ("src", os.path.relpath(here, src))
    in_src = os.path.normpath(os.path.join(src, target))
    if os.path.isfile(in_src) and not os.path.relpath(in_src, src).startswith(".."):
        return ("src", os.path.relpath(in_src, src))
    if public and os.path.isfile(os.path.join(public, target)):
        return ("public", target)
    return None


def build_graph(src, public):
    """Modules, edges {a: {b: [(file, line, text)]}}, placement problems, notes."""
    modules = {}
    edges = {}
    problems = []
    notes = []
    for rel in source_files(src):
        mod = module_of(rel)
        layer = layer_of(mod)
        if layer is None:
            problems.append(f"src/{rel}: outside the layer folders ({', '.join(LAYERS)})")
        elif layer not in RANK:
            problems.append(f"src/{rel}: folder '{layer}' is not a layer "
                            f"(known: {', '.join(LAYERS)}; add it to LAYERS in its place)")
        elif layer == "node" and area_of(mod) not in NODE_AREAS:
            problems.append(f"src/{rel}: '{area_of(mod)}' is not a folder of node/ "
                            f"(known: {', '.join(NODE_AREAS)}; add it to NODE_AREAS and "
                            f"NODE_RULES)")
        elif layer != "node" and mod.count("/") > 1:
            problems.append(f"src/{rel}: layer '{layer}' has no sub-folders")
        modules.setdefault(mod, []).append(rel)
        with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                where = resolve(src, public, rel, m.group(1))
                if where is None:
                    notes.append(f"note: src/{rel}:{lineno}: \"{m.group(1)}\" is not under "
                                 f"src/ or include/; not part of the graph")
                    continue
                kind, path = where
                if kind == "public":
                    continue
                dep = module_of(path)
                if dep == mod:
                    continue
                edges.setdefault(mod, {}).setdefault(dep, []).append(
                    (f"src/{rel}", lineno, m.group(1)))
    return modules, edges, problems, notes


def abi_leaks(src, public):
    """Includes from the public headers into src/: (header, line, target)."""
    leaks = []
    if not public:
        return leaks
    for root, dirs, files in os.walk(public):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE_RE.match(line)
                    if m and os.path.isfile(os.path.join(src, m.group(1))):
                        rel = os.path.relpath(path, os.path.dirname(public))
                        leaks.append((rel, lineno, m.group(1)))
    return leaks


def upward_arrows(edges):
    found = []
    for a in sorted(edges):
        for b in sorted(edges[a]):
            la, lb = layer_of(a), layer_of(b)
            if la in RANK and lb in RANK and RANK[la] < RANK[lb]:
                found.append((a, b))
    return found


def broken_rules(edges):
    """Arrows against NODE_RULES, HTTP_STARTED_BY or CLI_NODE_USES: (a, b, why)."""
    found = []
    for a in sorted(edges):
        for b in sorted(edges[a]):
            aa, ab = area_of(a), area_of(b)
            if a in STORE_PURE and layer_of(b) == "store" and b not in STORE_PURE:
                found.append((a, b, f"{a} is pure document shaping (STORE_PURE): it must not "
                                    f"include {b}, which calls the database"))
                continue
            if aa == ab:
                continue
            if ab in NODE_RULES.get(aa, ()):
                found.append((a, b, f"{aa}/ must not include {ab}/"))
            elif ab == "node/http" and layer_of(a) == "node" and a not in HTTP_STARTED_BY:
                found.append((a, b, f"only {', '.join(sorted(HTTP_STARTED_BY))} starts node/http/"))
            elif (aa == "cli" and layer_of(b) == "node" and a not in CLI_DAEMON
                  and ab not in CLI_NODE_USES):
                found.append((a, b, f"cohortctl uses only {', '.join(sorted(CLI_NODE_USES))}/ "
                                    f"of node/"))
    return found


def strongly_connected(nodes, edges):
    """Tarjan's algorithm, iterative; the groups of two or more modules."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def elementary_cycles(group, edges, limit):
    """The simple cycles inside one strongly connected group, each starting at its
    smallest module (so each is listed once), at most `limit` of them."""
    members = set(group)
    cycles = []
    for start in group:
        path = [start]

        def walk(node):
            for nxt in sorted(edges.get(node, {})):
                if nxt not in members or nxt < start:
                    continue
                if nxt == start:
                    cycles.append(list(path))
                    if len(cycles) >= limit:
                        return True
                elif nxt not in path:
                    path.append(nxt)
                    if walk(nxt):
                        return True
                    path.pop()
            return False

        if walk(start):
            return cycles, True
    return cycles, False


def where(edges, a, b):
    return ", ".join(f"{f}:{n}" for f, n, _ in edges[a][b])


def check(src, public=None, out=sys.stdout):
    """Prints the findings for the tree at `src`; returns the exit status (0 clean, 1 not)."""
    if public is None:
        guess = os.path.join(os.path.dirname(os.path.abspath(src)), "include")
        public = guess if os.path.isdir(guess) else None
    modules, edges, problems, notes = build_graph(src, public)
    up = upward_arrows(edges)
    rules = broken_rules(edges)
    groups = strongly_connected(modules, edges)
    leaks = abi_leaks(src, public)

    for note in notes:
        print(note, file=out)
    for p in problems:
        print(f"MISPLACED {p}", file=out)
    for header, lineno, target in leaks:
        print(f"ABI {header}:{lineno} includes src/{target}: the public headers must not "
              f"depend on the daemon's internals", file=out)
    for a, b in up:
        print(f"UPWARD {a} -> {b}: layer {layer_of(a)} must not include layer "
              f"{layer_of(b)} ({where(edges, a, b)})", file=out)
    for a, b, why in rules:
        print(f"RULE {a} -> {b}: {why} ({where(edges, a, b)})", file=out)
    for group in groups:
        cycles, cut = elementary_cycles(group, edges, MAX_CYCLES_PER_GROUP)
        print(f"CYCLE among {', '.join(group)}:", file=out)
        for cycle in cycles:
            ring = cycle + [cycle[0]]
            steps = "; ".join(f"{x} -> {y} ({where(edges, x, y)})"
                              for x, y in zip(ring, ring[1:]))
            print(f"  {' -> '.join(ring)}\n    via {steps}", file=out)
        if cut:
            print(f"  (more cycles; first {MAX_CYCLES_PER_GROUP} shown)", file=out)

    failures = len(problems) + len(up) + len(groups) + len(leaks) + len(rules)
    if failures:
        print(f"layers: FAILED: {len(up)} upward arrow(s), {len(groups)} cycle group(s), "
              f"{len(problems)} misplaced file(s), {len(leaks)} ABI include(s) of src/, "
              f"{len(rules)} broken folder rule(s); "
              f"rule: {' < '.join(LAYERS)}, a layer includes only itself and those below "
              f"it, with no cycle", file=out)
        return 1

    print(f"layers: clean ({len(modules)} modules, no cycle, no upward arrow; "
          f"order {' < '.join(LAYERS)})", file=out)
    for layer in LAYERS:
        mods = sorted(m for m in modules if layer_of(m) == layer)
        if not mods:
            continue
        below = {}
        for m in mods:
            for dep in edges.get(m, {}):
                dl = layer_of(dep)
                if dl != layer:
                    below[dl] = below.get(dl, 0) + 1
        uses = ", ".join(f"{dl} ({n})" for dl, n in sorted(below.items(),
                                                          key=lambda kv: RANK[kv[0]]))
        print(f"  {layer:<6} {len(mods):>2} modules: {' '.join(m.split('/', 1)[1] for m in mods)}"
              f"\n         uses: {uses or 'nothing below it'}", file=out)
    return 0


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    src = argv[1] if len(argv) > 1 else os.path.join(here, "..", "..", "src")
    if not os.path.isdir(src):
        print(f"layers: {src} is not a folder", file=sys.stderr)
        return 2
    return check(os.path.normpath(src))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
