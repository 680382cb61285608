#!/usr/bin/env python3
"""Call cycles between the source files of one component.

Usage: callcycles.py BUILD_DIR TARGET... (meson target names, e.g.
prismlb-core mod_hetzner_lb).

`meson introspect --targets` gives each target's sources and its file;
its object files are in the file's name plus ".p", each named after its
source's path below the target's meson.build with "/" as "_" (an object
left there by a file the target no longer has is not read). For each
object file of a target, `nm` lists the global symbols it defines
(T, D, B, R, ...) and the ones it uses but does not define (U): a call, or
any other reference such as a function handed over as a callback. File A
depends on file B when A uses a symbol B defines. Static functions are
local to their file and never make a dependency between files; a static
inline function of a header is compiled into each file that calls it, so
it makes none either. The script reports every strongly connected set of
more than one file (Tarjan's algorithm), with one cycle through it and
the symbols on each edge, and exits 1 when there is one.
"""
import json
import os
import subprocess
import sys


def symbols(obj):
    """(defined, undefined) global symbol names of one object file."""
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() and kind not in ("N",):
            defined.add(name)
    return defined, undefined


def source_name(obj):
    """hz_sync.c.o -> hz_sync.c (meson names objects after their source)."""
    base = os.path.basename(obj)
    return base[:-2] if base.endswith(".o") else base


def objects(build, name):
    """The object files of target name in build (a list of paths)."""
    out = subprocess.run(["meson", "introspect", "--targets", build], check=True,
                         capture_output=True, text=True).stdout
    for t in json.loads(out):
        if t["name"] != name:
            continue
        objdir = t["filename"][0] + ".p"
        top = os.path.dirname(t["defined_in"])
        objs = []
        for ts in t["target_sources"]:
            for src in ts.get("sources", []):
                if not src.endswith(".c"):
                    continue
                obj = os.path.relpath(src, top).replace(os.sep, "_") + ".o"
                if not os.path.exists(os.path.join(objdir, obj)):
                    raise SystemExit(f"callcycles: {name}: {obj} not built in {objdir}")
                objs.append(os.path.join(objdir, obj))
        return sorted(objs)
    raise SystemExit(f"callcycles: no target {name} in {build}")


def graph(objs):
    if not objs:
        raise SystemExit("callcycles: no object files")
    syms = {source_name(o): symbols(o) for o in objs}
    owner = {}
    for f, (defined, _) in syms.items():
        for s in defined:
            owner.setdefault(s, f)
    edges = {f: {} for f in syms}
    for f, (_, undefined) in syms.items():
        for s in undefined:
            g = owner.get(s)
            if g and g != f:
                edges[f].setdefault(g, set()).add(s)
    return edges


def sccs(edges):
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def one_cycle(edges, comp):
    """A cycle through comp's first file, as a list of files."""
    start, members = comp[0], set(comp)
    prev, todo = {start: None}, [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(edges[v]):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                todo.append(w)
    return comp


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    failed = False
    for target in sys.argv[2:]:
        edges = graph(objects(sys.argv[1], target))
        for comp in sccs(edges):
            failed = True
            cyc = one_cycle(edges, comp)
            print(f"{target}: call cycle between {', '.join(comp)}")
            for a, b in zip(cyc, cyc[1:]):
                print(f"  {a} -> {b}: {', '.join(sorted(edges[a][b]))}")
        if not sccs(edges):
            print(f"{target}: no call cycle between its {len(edges)} files")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
