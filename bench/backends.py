#!/usr/bin/env python3
"""Every backend side by side (issue 25): forwarding and recording cost per event, and the
demo's replay table.

  python3 bench/backends.py [ROUNDS] [WORKLOAD,...]   (defaults: 5 rounds; single,prodcons)
  (also run by `make bench`, whose BENCHMARKS.md gets the section)

For each workload and backend, alternated run by run (groups.run_group): bare (Debian's
library preloaded on its own where Debian has one: jemalloc, mimalloc, tcmalloc; none for
snmalloc and rpmalloc), SHIM_TRACE=0 (forwarding only) and recording (default settings).
Per round: forwarding = (SHIM_TRACE=0 - bare) / events, recording = (rec - SHIM_TRACE=0) /
events, wall and CPU time; medians over the rounds. Then the demo workload (make demo's,
4 threads x 250000 iterations) is captured on glibc and `shimlog replay` runs it against
every backend of the build. Prints the markdown section."""
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figures  # noqa: E402
from groups import run_group  # noqa: E402
from workloads import BACKENDS, BIN, OUT, SHIM, SHIMLOG, bare_preload, clean_env, workloads  # noqa: E402


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


def demo_replay(say):
    """The demo captured on glibc, replayed against every backend: (commands, table text)."""
    d = os.path.join(OUT, "backends")
    os.makedirs(d, exist_ok=True)
    for f in glob.glob(os.path.join(d, "demo.*.shimlog")):
        os.remove(f)
    env = clean_env()
    env.update({"LD_PRELOAD": SHIM, "SHIM_BACKEND": "glibc", "SHIM_LOG": os.path.join(d, "demo.%p.shimlog")})
    cap = [os.path.join(BIN, "demo"), "4", "250000"]
    subprocess.run(cap, env=env, check=True, stdout=subprocess.DEVNULL)
    logs = sorted(glob.glob(os.path.join(d, "demo.*.shimlog")))
    say("backends: replaying the demo against every backend")
    p = subprocess.run([SHIMLOG, "replay"] + logs, env=clean_env(), capture_output=True, text=True, check=True)
    for f in logs:
        os.remove(f)
    cmds = ["LD_PRELOAD=target/release/libshim.so SHIM_BACKEND=glibc SHIM_LOG=bench/out/backends/demo.%p.shimlog "
            "bench/out/bin/demo 4 250000", "target/release/shimlog replay bench/out/backends/demo.*.shimlog"]
    return cmds, p.stdout


def measure(rounds, say, names=("single", "prodcons")):
    ws = {w.name: w for w in workloads()}
    rows = []
    for name in names:
        w = ws[name]
        for b in BACKENDS:
            has_bare = bare_preload(b) is not None
            cfgs = ("bare", "off", "rec") if has_bare else ("off", "rec")
            g = run_group(w, b, w.full, cfgs, rounds, "backends", exact=False)
            rows.append({"workload": name, "backend": b, "version": g.get("backend_version") or "",
                         "events": g.get("events"),
                         "forward_wall_ns": per_event(g, "off", "bare", "wall_s") if has_bare else None,
                         "record_wall_ns": per_event(g, "rec", "off", "wall_s"),
                         "record_cpu_ns": per_event(g, "rec", "off", "cpu_s"), "problems": g["problems"]})
    cmds, table = demo_replay(say)
    return {"rounds": rounds, "rows": rows, "demo_commands": cmds, "demo_table": table}


def markdown(r):
    out = ["## Six backends side by side\n"]
    if not r:
        out.append("Not measured.\n")
        return out
    fmt = lambda x: "-" if x is None else f"{x:.1f}"
    out.append(f"`python3 bench/backends.py {r['rounds']}`: {r['rounds']} rounds, medians, ns per event. "
               "Forwarding: SHIM_TRACE=0 against Debian's library preloaded on its own where Debian ships one "
               "(a different build: part of the difference is the allocator, not the shim; snmalloc and "
               "rpmalloc have no Debian package, so no bare baseline). Recording: default settings against "
               "SHIM_TRACE=0 on the same backend. tcmalloc is gperftools' (not Google's).\n")
    out.append("| workload | backend | version | events | forwarding (wall) | recording (wall) | recording (CPU) | problems |")
    out.append("| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
    for x in r["rows"]:
        out.append(f"| {x['workload']} | {x['backend']} | {x['version']} | {x['events'] or '-'} | "
                   f"{fmt(x['forward_wall_ns'])} | {fmt(x['record_wall_ns'])} | {fmt(x['record_cpu_ns'])} | "
                   f"{'; '.join(x['problems']) or '-'} |")
    keep = [l for l in r["demo_table"].splitlines()
            if not l.startswith(("  slop, requests", "malloc ", "calloc ", "memalign ", "realloc ", "free "))]
    out.append("\nThe demo's replay against every backend (per-op latency rows and slop by size left out): "
               + ", then ".join(f"`{c}`" for c in r["demo_commands"]) + ".\n")
    out.append("```\n" + "\n".join(keep).rstrip() + "\n```\n")
    return out


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else ["single", "prodcons"]
    say = lambda m: print(f"[backends] {m}", file=sys.stderr, flush=True)
    os.makedirs(os.path.join(OUT, "logs"), exist_ok=True)
    print("\n".join(markdown(measure(rounds, say, names))))


if __name__ == "__main__":
    main()
