#!/usr/bin/env python3
"""Log bytes per event and the recorder thread's CPU per event, this build's libshim.so against
another (the previous format's), side by side: for the one-thread workload, the demo and
python3 on every backend, ROUNDS runs of each, the two builds alternated.

    python3 bench/columns.py --baseline OLD/libshim.so [--rounds N] [--write]

The recorder thread is the shim's only thread (the first one after the program's main thread
is started); its CPU time is sampled from /proc/PID/task/TID/schedstat every 3 ms. Medians
over the rounds. --write puts the table into BENCHMARKS.md's "Columnar frames" section.
Run bench/run.sh --smoke once first (it builds bench/out/bin)."""
import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figures  # noqa: E402
import logs  # noqa: E402
import runner  # noqa: E402
from workloads import BACKENDS, OUT, ROOT, SHIM, workloads  # noqa: E402

SIZES = {"single": 1_500_000, "prodcons": 1_000_000, "realloc_aligned": 100_000, "demo": 100_000, "python3": 1_500, "gcc": 1}


def one(w, backend, lib, tag):
    d = os.path.join(OUT, "columns")
    os.makedirs(d, exist_ok=True)
    for f in glob.glob(os.path.join(d, f"{tag}.*")):
        os.remove(f)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHIM_") and k != "LD_PRELOAD"}
    env.update(w.env)
    # Columns (SHIM_PACK, opt-in since they cost the recorder 3-5x); the baseline build ignores it.
    env.update({"SHIM_BACKEND": backend, "SHIM_LOG": os.path.join(d, f"{tag}.%p.shimlog"), "LC_ALL": "C", "SHIM_PACK": "columns"})
    m = runner.run(w.argv(SIZES[w.name]), env, os.path.join(d, "last-output.txt"), preload=lib, threads=True)
    if m["rc"] != 0:
        raise SystemExit(f"{w.name}/{backend} with {lib}: exit status {m['rc']}")
    paths = glob.glob(os.path.join(d, f"{tag}.*.shimlog"))
    info = [logs.frames(p) for p in paths]
    events = sum(i["records"] for i in info)
    size = sum(os.path.getsize(p) for p in paths)
    tcpu = {int(k): v for k, v in m["thread_cpu_ns"].items()}
    others = sorted(t for t in tcpu if t != m["pid"])
    rec_ns = tcpu[others[0]] if others else None
    for p in paths:
        os.remove(p)
    return {"bpe": size / events, "rec_ns": rec_ns / events if rec_ns else None,
            "version": info[0]["header"].get("format_version") if info else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="libshim.so of the previous format")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    ws = [w for w in workloads() if w.name in SIZES]
    rows = []
    for w in ws:
        for be in BACKENDS:
            new, old = [], []
            for i in range(a.rounds):
                old.append(one(w, be, a.baseline, "old"))
                new.append(one(w, be, SHIM, "new"))
            med = lambda rs, k: figures.median([r[k] for r in rs if r[k] is not None])
            row = (w.name, be, old[0]["version"], med(old, "bpe"), new[0]["version"], med(new, "bpe"),
                   med(old, "rec_ns"), med(new, "rec_ns"))
            rows.append(row)
            print(f"{w.name}/{be}: v{row[2]} {row[3]:.2f} B/ev, v{row[4]} {row[5]:.2f} B/ev; "
                  f"recorder {row[6]:.1f} -> {row[7]:.1f} ns/ev", flush=True)
    lines = ["| workload | backend | log B/event, previous (version) | log B/event, this build (version) | "
             "recorder CPU ns/event, previous | this build | ratio |", "|---|---|---|---|---|---|---|"]
    for n, be, v0, b0, v1, b1, r0, r1 in rows:
        lines.append(f"| {n} | {be} | {b0:.2f} (v{v0}) | {b1:.2f} (v{v1}) | {r0:.1f} | {r1:.1f} | {r1 / r0:.2f}x |")
    table = "\n".join(lines)
    print(table)
    if a.write:
        path = os.path.join(ROOT, "BENCHMARKS.md")
        text = open(path).read()
        start = text.index("<!-- columns table -->")
        end = text.index("<!-- /columns table -->")
        cmd = f"python3 bench/columns.py --baseline {a.baseline} --rounds {a.rounds}"
        text = text[:start] + f"<!-- columns table -->\nCommand: `{cmd}` (sizes {SIZES}).\n\n{table}\n" + text[end:]
        open(path, "w").write(text)


if __name__ == "__main__":
    main()
