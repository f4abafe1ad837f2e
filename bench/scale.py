"""Analysis at scale (issue 35): `shimlog stats` on the 100 M-event log of a one-thread
malloc/free loop (bench/workloads/single.c, 50 M iterations) recorded three ways (the
default settings: stacks `slow`, columnar frames; the default with SHIM_PACK=rows;
SHIM_STACKS=off with rows), and on genlog's random 8-thread synthetic log, each read four
ways side by side, round by round:

- before: shimlog as it was before the one pass and the decoding pool (commit 95ee01c),
  when SCALE_BEFORE names such a binary (`git worktree add /tmp/before 95ee01c && cd
  /tmp/before && cargo build --release -p shimlog`); left out otherwise;
- two passes: this shimlog with the call sites from a second read of the log, as before
  (`--two-pass-sites`, hidden), on one thread;
- one thread: `--one-thread` (its CPU time is the rate on one core);
- default: the frames decoded on a pool of threads (one per CPU), the merge and the
  analysis on this one; SHIMLOG_STAGES=1 makes it print what each stage took, per event,
  which gives what it would do with more cores (the merge and the analysis stay on one
  thread: the rate is bounded by 1 / their ns per event).

Then memory and time on many logs: the loop's run cut into window logs (SHIM_WINDOW=20ms
SHIM_EVERY=30ms, the first 168 windows kept) through stats, and `shimlog export` on the
default log.

`shimlog export` runs with SHIMLOG_STAGES=1 (CPU ns/event of reading, rows and arrays, and each
file's encoding); SCALE_EXPORT_BEFORE names a shimlog built before the export tuning (commit
6f21010) to compare with in the same run; `--export-only` records only the default loop log
and measures export alone, `rounds` times (nothing written to bench/scale.json).

Usage: python3 bench/scale.py [--smoke] [--write] [--events N] [--rounds R] [--export-only]; writes
bench/scale.json; with --write the section goes into bench/results.json and BENCHMARKS.md is
rendered again (bench/sections.py); `make bench` measures it with the other sections."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner  # noqa: E402
from workloads import BIN, OUT, ROOT, SHIM, SHIMLOG, clean_env  # noqa: E402

GENLOG = os.path.join(ROOT, "target", "release", "examples", "genlog")
DIR = os.path.join(OUT, "scale")
TITLE = "## Analysis at scale (bench/scale.py)"


def record(name, iters, extra):
    path = os.path.join(DIR, name + ".shimlog")
    env = dict(clean_env(), SHIM_LOG=path, LD_PRELOAD=SHIM, **extra)
    subprocess.run([os.path.join(BIN, "single"), str(iters)], env=env, check=True,
                   capture_output=True, timeout=900)
    return path


def events_of(log):
    p = subprocess.run([SHIMLOG, "stats", "--json", log], capture_output=True, timeout=900, check=True)
    return json.loads(p.stdout)["events"]


def run(argv, env=None):
    m = runner.run(argv, env or clean_env(), os.path.join(OUT, "last-output.txt"), timeout_s=1800)
    out = open(os.path.join(OUT, "last-output.txt"), errors="replace").read()
    stages = re.search(r"stages: (\d+) decoding threads ([\d.]+) ns/event CPU in all; merge and analysis on one thread ([\d.]+)", out)
    return {"ok": m["rc"] == 0, "wall_s": m["wall_s"], "cpu_s": m["cpu_s"], "maxrss_kb": m["maxrss_kb"],
            "stages": [float(stages.group(2)), float(stages.group(3))] if stages else None}


def measure_export(log, events, rounds):
    """`shimlog export` of `log`: this shimlog, and those SCALE_BEFORE (95ee01c) and
    SCALE_EXPORT_BEFORE (6f21010, before the export tuning) name, round by round; medians."""
    edir = os.path.join(DIR, "export")
    modes = [(m, exe) for m, exe in (("now", SHIMLOG), ("before (95ee01c)", os.environ.get("SCALE_BEFORE")),
                                     ("before export tuning (6f21010)", os.environ.get("SCALE_EXPORT_BEFORE")))
             if exe and os.access(exe, os.X_OK)]
    runs = {m: [] for m, _ in modes}
    for _ in range(rounds):
        for m, exe in modes:
            shutil.rmtree(edir, ignore_errors=True)
            r = run([exe, "export", log, "-o", edir], dict(clean_env(), SHIMLOG_STAGES="1"))
            out = open(os.path.join(OUT, "last-output.txt"), errors="replace").read()
            st = re.search(r"export stages: reading ([\d.]+) ns/event CPU; rows and arrays ([\d.]+); "
                           r"events.parquet encoding ([\d.]+); blocks.parquet encoding ([\d.]+)", out)
            r["stages_ns"] = [float(x) for x in st.groups()] if st else None
            r["bytes"] = sum(os.path.getsize(f) for f in glob.glob(os.path.join(edir, "**", "*.parquet"), recursive=True))
            if r["ok"]:
                runs[m].append(r)
    shutil.rmtree(edir, ignore_errors=True)
    ex = {}
    for m, _ in modes:
        ok = runs[m]
        if not ok:
            continue
        wall, cpu = median([r["wall_s"] for r in ok]), median([r["cpu_s"] for r in ok])
        st = [r["stages_ns"] for r in ok if r["stages_ns"]]
        ex[m] = {"wall_s": wall, "cpu_s": cpu, "maxrss_kb": max(r["maxrss_kb"] for r in ok),
                 "events_per_wall_s": events / wall, "events_per_cpu_s": events / cpu,
                 "bytes": ok[0]["bytes"], "runs": len(ok),
                 "stages_ns": [median([s[i] for s in st]) for i in range(4)] if st else None}
        r = ex[m]
        print(f"scale: export, {m}: {r['events_per_wall_s'] / 1e6:.1f} M events/s wall, "
              f"{r['events_per_cpu_s'] / 1e6:.1f} M events/CPU-s, max RSS {r['maxrss_kb'] / 1024:.0f} MiB, "
              f"{r['bytes'] / 1e6:.0f} MB" + (", stages ns/event: reading {:.1f}, rows {:.1f}, events file {:.1f}, "
                                              "blocks file {:.1f}".format(*r["stages_ns"]) if r["stages_ns"] else ""),
              flush=True)
    return ex


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None


def main():
    import sections
    args = sys.argv[1:]
    smoke = "--smoke" in args
    events = int(args[args.index("--events") + 1]) if "--events" in args else (1_000_000 if smoke else 100_000_000)
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else (1 if smoke else 3)
    if "--export-only" in args:
        os.makedirs(DIR, exist_ok=True)
        log = record("loop-default", events // 2, {})
        n = events_of(log)
        ex = measure_export(log, n, rounds)
        os.remove(log)
        print(json.dumps({"events": n, "rounds": rounds, "loadavg_end": open("/proc/loadavg").read().split()[:3],
                          "export": ex}, indent=1))
        return 0
    sec = section(measure_data(events, rounds, save=not smoke))
    print(sec)
    if "--write" in args and not smoke:
        sections.write(TITLE, sec)
    return 0


def measure(smoke=False, reps=None):
    """The section's text, for `make bench` (bench.py's SECTION_SCRIPTS)."""
    return section(measure_data(1_000_000 if smoke else 100_000_000, reps or (1 if smoke else 3), save=not smoke))


def measure_data(events=100_000_000, rounds=3, save=True):
    """Measures; writes bench/scale.json (not for a smoke run, whose figures mean nothing)."""
    before = os.environ.get("SCALE_BEFORE")
    os.makedirs(DIR, exist_ok=True)
    for f in glob.glob(os.path.join(DIR, "*.shimlog")):
        os.remove(f)
    iters = events // 2
    logs = [("loop, default settings (stacks slow, columns)", record("loop-default", iters, {})),
            ("loop, default settings, rows", record("loop-rows", iters, {"SHIM_PACK": "rows"})),
            ("loop, SHIM_STACKS=off, rows", record("loop-off-rows", iters, {"SHIM_STACKS": "off", "SHIM_PACK": "rows"}))]
    syn = os.path.join(DIR, "synthetic.shimlog")
    subprocess.run([GENLOG, syn, str(events)], check=True, capture_output=True, timeout=900)
    logs.append(("random 8-thread synthetic (genlog)", syn))
    modes = [("two passes, one thread", ["--two-pass-sites", "--one-thread"]),
             ("one thread", ["--one-thread"]), ("default", [])]
    if before and os.access(before, os.X_OK):
        modes.insert(0, ("before (95ee01c), default", None))
    rows = []
    for name, log in logs:
        rows.append({"log": name, "file": os.path.relpath(log, ROOT), "events": events_of(log),
                     "bytes": os.path.getsize(log), "runs": {m: [] for m, _ in modes}})
    for _ in range(rounds):
        for row, (_, log) in zip(rows, logs):
            for m, extra in modes:
                argv = [before, "stats", log] if extra is None else [SHIMLOG, "stats", log] + extra
                env = dict(clean_env(), SHIMLOG_STAGES="1")
                row["runs"][m].append(run(argv, env))
    for row in rows:
        row["modes"] = {}
        for m, _ in modes:
            ok = [r for r in row["runs"][m] if r["ok"]]
            if not ok:
                continue
            wall, cpu = median([r["wall_s"] for r in ok]), median([r["cpu_s"] for r in ok])
            st = [r["stages"] for r in ok if r["stages"]]
            row["modes"][m] = {"wall_s": wall, "cpu_s": cpu, "maxrss_kb": max(r["maxrss_kb"] for r in ok),
                               "events_per_wall_s": row["events"] / wall, "events_per_cpu_s": row["events"] / cpu,
                               "stages_ns": [median([s[0] for s in st]), median([s[1] for s in st])] if st else None}
        print(f"scale: {row['log']}: " + "; ".join(
            f"{m} {v['events_per_wall_s'] / 1e6:.1f} M/s wall, {v['events_per_cpu_s'] / 1e6:.1f} M/s CPU"
            for m, v in row["modes"].items()), flush=True)
    # Window logs of one process, read together.
    wdir = os.path.join(DIR, "windows")
    shutil.rmtree(wdir, ignore_errors=True)
    os.makedirs(wdir)
    env = dict(clean_env(), SHIM_LOG=os.path.join(wdir, "w.%n.shimlog"), LD_PRELOAD=SHIM,
               SHIM_WINDOW="20ms", SHIM_EVERY="30ms")
    subprocess.run([os.path.join(BIN, "single"), str(iters)], env=env, check=True, capture_output=True, timeout=900)
    wins = sorted(glob.glob(os.path.join(wdir, "w.*.shimlog")), key=lambda p: int(p.split(".")[-2]))
    for extra_w in wins[168:]:
        os.remove(extra_w)
    wins = wins[:168]
    win = {"logs": len(wins), "events": None, "runs": {}}
    p = subprocess.run([SHIMLOG, "stats", "--json"] + wins, capture_output=True, timeout=900)
    if p.returncode == 0:
        win["events"] = json.loads(p.stdout)["events"]
    for m, extra in (("one thread", ["--one-thread"]), ("default", [])):
        r = run([SHIMLOG, "stats"] + extra + wins)
        win["runs"][m] = r
    if before and os.access(before, os.X_OK):
        win["runs"]["before (95ee01c), default"] = run([before, "stats"] + wins)
    print(f"scale: {len(wins)} windows, {win['events']} events: " + "; ".join(
        f"{m} {r['wall_s']:.2f} s, max RSS {r['maxrss_kb'] / 1024:.0f} MiB" for m, r in win["runs"].items()), flush=True)
    shutil.rmtree(wdir, ignore_errors=True)
    # export on the default loop log.
    ex = measure_export(logs[0][1], rows[0]["events"], 1 if rounds < 3 else 2)
    for f in glob.glob(os.path.join(DIR, "*.shimlog")):
        os.remove(f)
    load = open("/proc/loadavg").read().split()[:3]
    res = {"events": events, "rounds": rounds, "cpus": os.cpu_count(), "loadavg_end": load,
           "logs": rows, "windows": win, "export": ex,
           "command": "python3 bench/scale.py" + (f" --events {events}" if events != 100_000_000 else "")
           + (f" --rounds {rounds}" if rounds != 3 else "") + (f"  (SCALE_BEFORE={before})" if before else "")}
    if save:
        with open(os.path.join(ROOT, "bench", "scale.json"), "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    return res


def section(res):
    """The section's markdown (its title first)."""
    names = []
    for row in res["logs"]:
        for m in row["modes"]:
            if m not in names:
                names.append(m)
    out = [TITLE, "",
           f"`{res['command']}`: {res['rounds']} rounds, medians; {res['cpus']} CPUs, load average at the end "
           f"{' '.join(res['loadavg_end'])} (other work on the machine: wall rates are lower bounds). "
           "M events/s per wall second (per CPU second in brackets).", "",
           "| log | events | " + " | ".join(names) + " | default / one thread | stages (ns/event CPU: decoding threads, merge+analysis) |",
           "|---|---|" + "---|" * len(names) + "---|---|"]
    for row in res["logs"]:
        ms = row["modes"]
        cells = [f"{ms[m]['events_per_wall_s'] / 1e6:.1f} ({ms[m]['events_per_cpu_s'] / 1e6:.1f})" if m in ms else "-" for m in names]
        ratio = ms["default"]["events_per_wall_s"] / ms["one thread"]["events_per_wall_s"] if "default" in ms and "one thread" in ms else None
        st = ms.get("default", {}).get("stages_ns")
        out.append(f"| {row['log']} | {row['events'] / 1e6:.0f} M | " + " | ".join(cells)
                   + f" | {ratio:.2f}x |" + (f" {st[0]:.1f}, {st[1]:.1f} |" if st else " - |"))
    out.append("")
    out.append("With N CPUs the decoding spreads over N threads and the merge and the analysis stay on one: "
               "the wall rate is about min(N / (decoding + merge and analysis ns), 1 / merge-and-analysis ns) "
               "per event; the last column gives both figures.")
    w = res["windows"]
    out.append("")
    out.append(f"{w['logs']} window logs of one process ({w['events']} events) through `stats` together: " + "; ".join(
        f"{m} {r['wall_s']:.2f} s wall, max RSS {r['maxrss_kb'] / 1024:.0f} MiB" for m, r in w["runs"].items()) + ".")
    if res["export"]:
        out.append("")
        out.append("`shimlog export` of the default loop log: " + "; ".join(
            f"{m} {r['events_per_wall_s'] / 1e6:.1f} M events/s wall"
            + (f" ({r['events_per_cpu_s'] / 1e6:.1f} per CPU second)" if "events_per_cpu_s" in r else "")
            + f", max RSS {r['maxrss_kb'] / 1024:.0f} MiB"
            + (" (CPU ns/event: reading {:.1f}, rows and arrays {:.1f}, events.parquet {:.1f}, blocks.parquet {:.1f},"
               " each stage on a thread of its own)".format(*r["stages_ns"]) if r.get("stages_ns") else "")
            for m, r in res["export"].items()) + ".")
    big = os.path.join(ROOT, "bench", "scale_big.json")
    if os.path.exists(big):
        b = json.load(open(big))
        out.append("")
        out.append(f"Measured once by hand, not in `make bench` (too long): {b['what']}")
        out.append("")
        out.append("| verb | wall | CPU | max RSS | command |")
        out.append("|---|---|---|---|---|")
        for r in b["runs"]:
            out.append(f"| {r['verb']} | {r['wall_s']:.0f} s | {r['cpu_s']:.0f} s | {r['maxrss_kb'] / 1024:.0f} MiB | `{r['command']}` |")
        if b.get("note"):
            out.append("")
            out.append(b["note"])
    return "\n".join(out) + "\n"

if __name__ == "__main__":
    sys.exit(main())
