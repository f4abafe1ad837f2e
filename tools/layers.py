#!/usr/bin/env python3
"""The sources' import check, run by .ci/run before `make test`: exits 1 naming what fails.

1. No circle: in each crate's src/ (tests left out), no files that import each other in a
   circle. A file imports another when it names it by a `crate::`, `super::` or `self::` path,
   or by a bare path through one of its own child modules (`wrappers::address` in
   patch/mod.rs); comments and string literals are not read.
2. The layers of shim/src are docs/design.md's table (the one whose second column is headed
   "files in `shim/src`", top layer first): every file of shim/src is in a row (a file, or a
   folder with everything under it; lib.rs, the crate root, aside), and no file imports a
   file of a row above its own.
3. A call up by name (an `extern "C"` or `extern "Rust"` block of shim/src declaring a
   function that another file of shim/src defines with `no_mangle`, in a row above) is
   listed in docs/design.md as "- `FILE` calls `NAME` (`FILE`)", and every such line is one.
4. shim/src/lib.rs's layer comment and docs/layout.md's `shim/` row name every row's files,
   in the table's order (what is in parentheses aside).

Usage: python3 tools/layers.py [ROOT]   (ROOT: the repository, by default this file's ../)
The circle logic started from ../shared/tools/modcycles.py.
"""
import os
import re
import sys

CRATES = ["backend", "recorder", "shim", "shimlog", "itest"]
SHIM = "shim/src"
TABLE_HEAD = "files in `shim/src`"


def modules(src):
    """module path (tuple) -> file"""
    m = {}
    for dp, _, fs in os.walk(src):
        for f in fs:
            if not f.endswith(".rs"):
                continue
            p = os.path.relpath(os.path.join(dp, f), src)[:-3].split(os.sep)
            if p[-1] in ("mod", "lib", "main"):
                p = p[:-1]
            m[tuple(p)] = os.path.join(dp, f)
    return m


def code_only(text):
    """The text without comments, string and char literals (each replaced by a space)."""
    text = re.sub(r'r(#*)"(?:.|\n)*?"\1', " ", text)  # raw strings
    text = re.sub(r'"(?:\\.|[^"\\])*"', " ", text)  # strings
    text = re.sub(r"'(?:\\.|[^'\\\n])'", " ", text)  # char literals
    text = re.sub(r"/\*(?:.|\n)*?\*/", " ", text)  # block comments
    return re.sub(r"//[^\n]*", " ", text)  # line and doc comments


def source(f):
    """A file's code, its `#[cfg(test)] mod ... {` block to the end of the file left out."""
    text = open(f, errors="replace").read()
    cut = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
    return text[: cut.start()] if cut else text


def edges(src):
    """module -> the modules it imports (the crate root never counted)"""
    mods = modules(src)
    g = {k: set() for k in mods}
    for k, f in mods.items():
        text = code_only(source(f))
        children = {c[-1] for c in mods if len(c) == len(k) + 1 and c[: len(k)] == k}
        found = []  # (root, rest)
        for base, rest in re.findall(r"\b(crate|super|self)((?:::\w+)+)", text):
            root = () if base == "crate" else (k[:-1] if base == "super" else k)
            found.append((root, rest))
        for base, grp in re.findall(r"\buse\s+(crate|super|self)::\{([^}]*)\}", text):
            root = () if base == "crate" else (k[:-1] if base == "super" else k)
            found += [(root, "::" + x.strip().split("::")[0]) for x in grp.split(",") if x.strip()]
        for name, rest in re.findall(r"(?<![:\w])(\w+)((?:::\w+)+)", text):
            if name in children:
                found.append((k, "::" + name + rest))
        for root, rest in found:
            parts = root + tuple(x for x in rest.split("::") if x)
            for n in range(len(parts), 0, -1):
                if parts[:n] in mods:
                    if parts[:n] != k and parts[:n] != ():
                        g[k].add(parts[:n])
                    break
    return g, mods


def circles(g):
    """Each set of two or more modules that import each other in a circle (Tarjan)."""
    idx, low, st, on, out, c = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def go(v):
        idx[v] = low[v] = c[0]
        c[0] += 1
        st.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in idx:
                go(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = st.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in idx:
            go(v)
    return out


def rel(mods, k, src):
    """shim/src-relative file name of module k"""
    return os.path.relpath(mods[k], src)


def strip_parens(s):
    while True:
        t = re.sub(r"\([^()]*\)", " ", s)
        if t == s:
            return s
        s = t


def layer_table(design):
    """[(row name, [paths])] of docs/design.md's shim table, top first."""
    rows, inside = [], False
    for line in open(design).read().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells and len(cells) > 1 and cells[1] == TABLE_HEAD:
            inside = True
            continue
        if not inside:
            continue
        if not cells:
            break
        if set(cells[0]) <= set("-: "):
            continue
        rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1])))
    return rows


def row_of(path, table):
    """The row index of shim/src file `path` (the longest entry naming it or its folder)."""
    best, blen = None, -1
    for i, (_, paths) in enumerate(table):
        for p in paths:
            if (p == path or (p.endswith("/") and path.startswith(p))) and len(p) > blen:
                best, blen = i, len(p)
    return best


def up_by_name(src, mods):
    """[(declaring file, name, defining file)] for extern declarations of the crate's own
    no_mangle functions."""
    defined, declared = {}, []
    for k, f in mods.items():
        text = code_only(source(f))
        for name in re.findall(r"#\[(?:unsafe\()?no_mangle\)?\][^{;]*?\bfn\s+(\w+)", text):
            defined[name] = rel(mods, k, src)
        # (code_only blanked the ABI's string: `extern "C" {` reads `extern   {`)
        for block in re.findall(r"\bextern\s*\{([^}]*)\}", text):
            declared += [(rel(mods, k, src), n) for n in re.findall(r"\bfn\s+(\w+)", block)]
    return [(a, n, defined[n]) for a, n in declared if n in defined and defined[n] != a]


def check_order(what, text, table, src):
    """`what` names every row's files, in the table's order (parenthesised text aside)."""
    errs, seen = [], []
    for p in re.findall(r"`([^`]+)`", strip_parens(text)):
        if os.path.exists(os.path.join(src, p)):
            r = row_of(p, table)
            if r is not None:
                seen.append((p, r))
    for i, ((p, r), (q, s)) in enumerate(zip(seen, seen[1:])):
        if s < r:
            errs.append(f"{what}: `{q}` ({table[s][0]}) comes after `{p}` ({table[r][0]}), a layer below it")
    named = {p for p, _ in seen}
    for name, paths in table:
        for p in paths:
            if p not in named:
                errs.append(f"{what}: does not name `{p}` ({name})")
    return errs


def main(root):
    errs = []
    for crate in CRATES:
        src = os.path.join(root, crate, "src")
        if not os.path.isdir(src):
            continue
        g, mods = edges(src)
        for comp in circles(g):
            names = " ".join(rel(mods, k, src) for k in comp)
            errs.append(f"{crate}/src: {len(comp)} files import each other in a circle: {names}")

    src = os.path.join(root, SHIM)
    design = os.path.join(root, "docs", "design.md")
    table = layer_table(design)
    if not table:
        errs.append(f"docs/design.md: no table with a column headed {TABLE_HEAD}")
        return errs
    g, mods = edges(src)
    for _, paths in table:
        for p in paths:
            if not os.path.exists(os.path.join(src, p)):
                errs.append(f"docs/design.md: the layer table names `{p}`, which is not in {SHIM}")
    row = {}
    for k in mods:
        if k == ():
            continue
        f = rel(mods, k, src)
        row[k] = row_of(f, table)
        if row[k] is None:
            errs.append(f"{SHIM}/{f} is in no row of the layer table in docs/design.md")
    for a in sorted(g):
        for b in sorted(g[a]):
            if row.get(a) is not None and row.get(b) is not None and row[b] < row[a]:
                errs.append(
                    f"{SHIM}/{rel(mods, a, src)} ({table[row[a]][0]}) imports "
                    f"{rel(mods, b, src)} ({table[row[b]][0]}), a layer above it"
                )

    text = open(design).read()
    listed = set(re.findall(r"^- `([^`]+)` calls `(\w+)` \(`([^`]+)`\)", text, re.M))
    ups = set()
    for a, n, d in up_by_name(src, mods):
        ra, rd = row_of(a, table), row_of(d, table)
        if ra is not None and rd is not None and rd < ra:
            ups.add((a, n, d))
    for a, n, d in sorted(ups - listed):
        errs.append(f"{SHIM}/{a} calls `{n}` of {d}, a layer above it, by name; not listed in docs/design.md")
    for a, n, d in sorted(listed - ups):
        errs.append(f"docs/design.md lists `{a}` calling `{n}` (`{d}`) up by name: no such call")

    lib = open(os.path.join(src, "lib.rs")).read()
    comment = "\n".join(l[3:] for l in lib.splitlines() if l.startswith("//!"))
    errs += check_order(f"{SHIM}/lib.rs's layer comment", comment, table, src)
    layout = [l for l in open(os.path.join(root, "docs", "layout.md")).read().splitlines() if l.startswith("| `shim/`")]
    if not layout:
        errs.append("docs/layout.md: no row for `shim/`")
    else:
        errs += check_order("docs/layout.md's `shim/` row", layout[0].split("|")[2], table, src)
    return errs


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    errs = main(root)
    for e in errs:
        print(f"layers: {e}", file=sys.stderr)
    sys.exit(1 if errs else 0)
