#!/usr/bin/env python3
"""Forwarding and recording cost per event for every backend, side by side.

  python3 bench/backends.py [ROUNDS] [WORKLOAD,...]   (defaults: 5 rounds; single,prodcons)

For each workload and backend, alternated run by run (bench.run_group): bare (Debian's
library preloaded on its own where Debian has one: jemalloc, mimalloc, tcmalloc; none for
snmalloc and rpmalloc), SHIM_TRACE=0 (forwarding only) and recording (default settings).
Per round: forwarding = (SHIM_TRACE=0 - bare) / events, recording = (rec - SHIM_TRACE=0) /
events, wall and CPU time; medians over the rounds. Prints a markdown table."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import figures  # noqa: E402
from workloads import BACKENDS, bare_preload, workloads  # noqa: E402


def per_event(g, a, b, key):
    ev = g.get("events")
    if not ev:
        return None
    by = {}
    for r in g["runs"]:
        if r["ok"]:
            by.setdefault(r["round"], {})[r["config"]] = r[key]
    xs = [(c[a] - c[b]) * 1e9 / ev for c in by.values() if a in c and b in c]
    return figures.median(xs) if xs else None


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else ["single", "prodcons"]
    ws = {w.name: w for w in workloads()}
    bench.fresh_dir(os.path.join(bench.OUT, "logs"))
    rows = []
    for name in names:
        w = ws[name]
        for b in BACKENDS:
            has_bare = bare_preload(b) is not None
            cfgs = ("bare", "off", "rec") if has_bare else ("off", "rec")
            g = bench.run_group(w, b, w.full, cfgs, rounds, "backends", exact=False)
            f = lambda a, c, k: per_event(g, a, c, k)
            rows.append((name, b, g.get("backend_version") or "", g.get("events"),
                         f("off", "bare", "wall_s") if has_bare else None,
                         f("rec", "off", "wall_s"), f("rec", "off", "cpu_s"), g["problems"]))
    fmt = lambda x: "-" if x is None else f"{x:.1f}"
    print(f"\n{rounds} rounds, medians; ns per event. Forwarding: SHIM_TRACE=0 against Debian's "
          "library preloaded alone (a different build: part of it is the allocator, not the shim).\n")
    print("| workload | backend | version | events | forwarding (wall) | recording (wall) | recording (CPU) | problems |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
    for n, b, v, ev, fw, rw, rc, pr in rows:
        print(f"| {n} | {b} | {v} | {ev or '-'} | {fmt(fw)} | {fmt(rw)} | {fmt(rc)} | {'; '.join(pr) or '-'} |")


if __name__ == "__main__":
    main()
