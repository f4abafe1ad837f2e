#!/usr/bin/env python3
"""Every name of jemalloc's mallctl tree, read from its src/ctl.c.

    tools/jemalloc-ctl-names.py CTL_C MUTEX_PROF_H > backend/src/emulate/jemalloc-5.3.0-ctl.txt

With jemalloc's repository at JE (https://github.com/jemalloc/jemalloc):

    tools/jemalloc-ctl-names.py <(git -C JE show 5.3.0:src/ctl.c) \\
        <(git -C JE show 5.3.0:include/jemalloc/internal/mutex_prof.h)

One line per leaf of the tree (a name mallctl can answer), in the tree's order, three
tab-separated columns:

    NAME    the dotted name; an indexed element is written {INDEX}, INDEX the name of the
            index function that accepts it in ctl.c (arena_i, stats_arenas_i, arenas_bin_i,
            stats_arenas_i_bins_j, ...)
    MIB     the MIB mallctlnametomib gives for it, child numbers in ctl.c's order, an
            indexed element written {INDEX} as in NAME
    GUARD   the condition under which the leaf answers at all, as its ctl function (or
            the macro that defines it) tests it first: `config_prof`, `config_prof && opt_prof`,
            `config_fill`, `have_background_thread`, ...; `-` for none. An index function
            that tests one gives it to every leaf under it. In a build where the condition
            is false the name is found (mallctlnametomib succeeds, except under a guarded
            index) and the call is ENOENT.

The mutex statistics nodes that ctl.c builds with the MUTEX_PROF_DATA_NODE and OP macros
are expanded from the lists of mutex_prof.h, as the C preprocessor does.
"""
import re
import sys


def strip_comments(s):
    s = re.sub(r"/\*.*?\*/", " ", s, flags=re.S)
    return re.sub(r"//[^\n]*", "", s)


def join_continuations(s):
    return re.sub(r"\\\n", " ", s)


def op_lists(mutex_prof_h):
    """MUTEX_PROF_GLOBAL_MUTEXES and MUTEX_PROF_ARENA_MUTEXES: their OP(x) names."""
    h = join_continuations(strip_comments(mutex_prof_h))
    lists = {}
    for m in re.finditer(r"#define\s+(MUTEX_PROF_\w+_MUTEXES)\s+([^\n]*)", h):
        lists[m.group(1)] = re.findall(r"OP\((\w+)\)", m.group(2))
    for want in ("MUTEX_PROF_GLOBAL_MUTEXES", "MUTEX_PROF_ARENA_MUTEXES"):
        if not lists.get(want):
            sys.exit(f"jemalloc-ctl-names: no {want} in mutex_prof.h")
    return lists


def expand_ops(text, lists):
    """`#define OP(mtx) BODY` LIST `#undef OP`: BODY once per name of LIST."""

    def one(m):
        body, lst = m.group(1), m.group(2)
        out = []
        for name in lists[lst]:
            b = body.replace("##mtx", name).replace("#mtx", f'"{name}"')
            b = re.sub(r"\bmtx\b", name, b)
            out.append(b)
        return "\n".join(out)

    return re.sub(r"#define\s+OP\(mtx\)\s*([^\n]*)\n\s*(MUTEX_PROF_\w+_MUTEXES)\s*\n\s*#undef\s+OP", one, text)


def positive(cond):
    """The condition under which a guard `if (COND) return ENOENT` lets the call through:
    `!a`, `!(a && b)` and `!a || !b` all give `a && b`."""
    c = re.sub(r"\s+", " ", cond).strip()
    m = re.fullmatch(r"!\((.*)\)", c)
    if m:
        return m.group(1).strip()
    terms = [t.strip() for t in c.split("||")]
    if all(t.startswith("!") for t in terms):
        return " && ".join(t[1:].strip() for t in terms)
    sys.exit(f"jemalloc-ctl-names: a guard not understood: {cond}")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: jemalloc-ctl-names.py CTL_C MUTEX_PROF_H")
    ctl = open(sys.argv[1]).read()
    lists = op_lists(open(sys.argv[2]).read())
    src = join_continuations(strip_comments(ctl))

    # The tree: from its NAME macro to the #undef after super_root_node.
    start = src.index("#define NAME(n)")
    end = src.index("#undef NAME", start)
    tree = src[start:end]
    # MUTEX_PROF_DATA_NODE(prefix): its body, then every use expanded.
    m = re.search(r"#define\s+MUTEX_PROF_DATA_NODE\(prefix\)\s*([^\n]*)", tree)
    if not m:
        sys.exit("jemalloc-ctl-names: no MUTEX_PROF_DATA_NODE in ctl.c")
    template = m.group(1)
    tree = tree[: m.start()] + tree[m.end():]
    tree = expand_ops(tree, lists)
    tree = re.sub(
        r"\bMUTEX_PROF_DATA_NODE\((\w+)\)",
        lambda u: template.replace("##prefix##", u.group(1)).replace("prefix", u.group(1)),
        tree,
    )

    named, indexed = {}, {}
    for m in re.finditer(r"static\s+const\s+ctl_(named|indexed)_node_t\s+(\w+)_node\s*\[\]\s*=\s*\{(.*?)\};", tree, re.S):
        kind, node, body = m.groups()
        if kind == "indexed":
            idx = re.search(r"INDEX\((\w+)\)", body)
            indexed[node] = idx.group(1)
            continue
        children = []
        for e in re.finditer(r'NAME\("([^"]*)"\)\s*,\s*(CTL\((\w+)\)|CHILD\(\s*(named|indexed)\s*,\s*(\w+)\s*\))', body):
            name, _, fn, ckind, child = e.groups()
            children.append((name, fn, ckind, child))
        named[node] = children

    # Guards: what a ctl function (or an index function) tests before anything else.
    guards = {}
    for m in re.finditer(r"\bCTL_RO_(NL_CGEN|CGEN|CLGEN)\(([^;]*?)\)\s*(?:;|\n)", src):
        args = [a.strip() for a in m.group(2).split(",")]
        fn = args[2] if m.group(1) == "CLGEN" else args[1]
        guards[fn] = args[0]
    for m in re.finditer(r"\n(\w+)_(ctl|index)\(tsdn?_t \*tsdn?,[^{]*\{(.*?)\n\}", src, re.S):
        fn, what, body = m.groups()
        g = re.match(r"\s*(?:[\w \*=]+;\s*)*if \(([^{};]*?)\)\s*\{?\s*(?:ret = ENOENT;|return (?:ENOENT|NULL);)", body, re.S)
        # Only a test of the build or of an option: an index function's bound is not one.
        if g and re.search(r"\b(config|opt|have)_", g.group(1)):
            guards[fn if what == "ctl" else fn + "_index"] = positive(g.group(1))
    # The mutex statistics (RO_MUTEX_CTL_GEN): CTL_RO_CGEN(config_stats, ...) each.
    mutex_guard = re.search(r"#define\s+RO_MUTEX_CTL_GEN\(n, l\)\s*CTL_RO_CGEN\((\w+),", src)
    if not mutex_guard:
        sys.exit("jemalloc-ctl-names: no RO_MUTEX_CTL_GEN in ctl.c")

    out = []

    def walk(node, names, mib, guard):
        for i, (name, fn, ckind, child) in enumerate(named[node]):
            n, b = names + [name], mib + [str(i)]
            if fn:
                g = guards.get(fn)
                if g is None and re.search(r"_num_ops$|_num_wait$|_num_spin_acq$|_num_owner_switch$|_total_wait_time$|_max_wait_time$|_max_num_thds$", fn):
                    g = mutex_guard.group(1)
                g = guard or g or "-"
                out.append((".".join(n), ".".join(b), g))
            elif ckind == "named":
                walk(child, n, b, guard)
            else:
                index = indexed[child]
                sup = named["super_" + index]
                assert len(sup) == 1 and sup[0][0] == "" and sup[0][2] == "named", sup
                walk(sup[0][3], n + ["{" + index + "}"], b + ["{" + index + "}"], guard or guards.get(index + "_index"))

    walk("root", [], [], None)
    print("# jemalloc's mallctl names, from its src/ctl.c (tools/jemalloc-ctl-names.py; see there for")
    print("# the columns). Generated with:")
    print("#   tools/jemalloc-ctl-names.py <(git -C jemalloc show 5.3.0:src/ctl.c) \\")
    print("#       <(git -C jemalloc show 5.3.0:include/jemalloc/internal/mutex_prof.h)")
    for row in out:
        print("\t".join(row))


if __name__ == "__main__":
    main()
