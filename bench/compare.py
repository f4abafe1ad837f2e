"""`shimlog compare`'s numbers (issue 34), run by make bench and on its own:

    python3 bench/compare.py [--smoke] [--write] [REPS]

1. Speed and memory: two synthetic logs of COMPARE_EVENTS events each (default 100 M; the
   genlog example, 8 threads, 100 000 and 150 000 blocks live), `shimlog stats` on each and
   `shimlog compare A --vs B`, REPS rounds (default 3) in turns; medians of wall time, CPU
   time and peak RSS (wait4's rusage of each process). The target: compare's wall time
   within 1.5x the two stats' together, its peak RSS that of the larger stats'.
2. False alarms: 20 pairs of runs of the bench workloads (single, prodcons, realloc_aligned,
   demo, python3, sized to run about 2 s each; four pairs each, the backend rotating through
   glibc, jemalloc, mimalloc, glibc), both runs of a pair the same configuration (recorded,
   the default settings), compared at the default confidence; every metric flagged
   (`differs`) is a false alarm. The target: at most 1 over all 20 pairs.

--write replaces the section "shimlog compare" of BENCHMARKS.md (or appends it)."""
import glob
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sections  # noqa: E402
import workloads as wl  # noqa: E402

ROOT = wl.ROOT
TITLE = "## shimlog compare"
DIR = os.path.join(wl.OUT, "compare")
GENLOG = os.path.join(ROOT, "target", "release", "examples", "genlog")
# Starting sizes, each scaled by calibrated() to runs of about RUN_S seconds (memory and
# calls are judged from one log a side only from logs of 1.5 s or more: docs/compare.md).
PAIR_SIZES = {"single": 4_500_000, "prodcons": 6_000_000, "realloc_aligned": 200_000, "demo": 150_000, "python3": 9_000}
PAIR_BACKENDS = ("glibc", "jemalloc", "mimalloc", "glibc")
# Each workload's pairs run about this long (calibrated(): sized by one timed run).
RUN_S = 3.0
# Runs a side in each pair: from one run a side compare calls no difference in memory or
# calls (one run cannot show how much the next would differ: docs/compare.md).
RUNS_A_SIDE = int(os.environ.get("COMPARE_RUNS_A_SIDE", "2"))


def measured(argv):
    """(wall s, CPU s, peak RSS bytes) of one run of argv, from wait4."""
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 1)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"{' '.join(argv)}: exit status {code}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def speed(events, reps, say):
    os.makedirs(DIR, exist_ok=True)
    logs = []
    for name, live in (("a", 100_000), ("b", 150_000)):
        path = os.path.join(DIR, f"{name}.shimlog")
        argv = [GENLOG, path, str(events), "8", str(live)]
        if not os.path.exists(path) or os.path.getsize(path) == 0 or not _about(_events(path), events):
            say(f"compare: writing {os.path.relpath(path, ROOT)} ({events} events)")
            # The writer never overwrites a log (it would write PATH.2 beside it, and the old
            # one would be measured): the old one and any numbered ones go first.
            for old in glob.glob(path) + glob.glob(path + ".*"):
                os.remove(old)
            subprocess.run(argv, check=True, capture_output=True, timeout=1800)
            if not _about(_events(path), events):
                raise RuntimeError(f"{path}: genlog wrote {_events(path)} events, not about {events}")
        logs.append((path, wl.shown(argv, {})))
    a, b = logs[0][0], logs[1][0]
    runs = {"stats_a": [], "stats_b": [], "compare": []}
    cmds = {"stats_a": [wl.SHIMLOG, "stats", a], "stats_b": [wl.SHIMLOG, "stats", b],
            "compare": [wl.SHIMLOG, "compare", a, "--vs", b]}
    for r in range(reps):
        order = list(cmds) if r % 2 == 0 else list(reversed(list(cmds)))
        for k in order:
            runs[k].append(measured(cmds[k]))
        say(f"compare speed, round {r + 1}: " + ", ".join(f"{k} {runs[k][-1][0]:.2f} s" for k in cmds))
    med = {k: {"wall_s": statistics.median(x[0] for x in v), "cpu_s": statistics.median(x[1] for x in v),
               "max_rss_bytes": statistics.median(x[2] for x in v), "walls": [round(x[0], 3) for x in v]}
           for k, v in runs.items()}
    both = med["stats_a"]["wall_s"] + med["stats_b"]["wall_s"]
    return {"events": events, "file_bytes": [os.path.getsize(a), os.path.getsize(b)],
            "made_by": [x[1] for x in logs], "reps": reps, "runs": med,
            "commands": {k: wl.shown(v, {}) for k, v in cmds.items()},
            "time_ratio": med["compare"]["wall_s"] / both,
            "cpu_ratio": med["compare"]["cpu_s"] / (med["stats_a"]["cpu_s"] + med["stats_b"]["cpu_s"]),
            "memory_ratio": med["compare"]["max_rss_bytes"] / max(med["stats_a"]["max_rss_bytes"],
                                                                    med["stats_b"]["max_rss_bytes"])}


def _about(n, events):
    """genlog's log holds the events asked for and a few records of its process and threads."""
    return n is not None and events <= n <= events + 1000


def _events(path):
    p = subprocess.run([wl.SHIMLOG, "stats", "--json", path], capture_output=True, timeout=1800)
    return json.loads(p.stdout).get("events") if p.returncode == 0 else None


def record(w, size, backend, tag):
    """One recorded run of workload w; its log's path."""
    argv, over, log_glob, _ = wl.launch(w, size, backend, "rec", tag)
    env = wl.clean_env()
    env.update(over)
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{w.name} on {backend}: exit {p.returncode}: {p.stderr[-400:]}")
    found = sorted(glob.glob(log_glob), key=os.path.getsize)
    if not found:
        raise RuntimeError(f"{w.name} on {backend}: no log ({log_glob})")
    # The program's own process is the largest log (python3 may leave none other; a helper
    # process, if any, a small one).
    return found[-1], wl.shown(argv, over)


def _compared(a, b):
    """compare's --json document of logs a (one path or a list) against b."""
    a, b = ([a] if isinstance(a, str) else a), ([b] if isinstance(b, str) else b)
    p = subprocess.run([wl.SHIMLOG, "compare", *a, "--vs", *b, "--json"], capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"compare {a} --vs {b}: exit {p.returncode}: {p.stderr[-400:]}")
    return json.loads(p.stdout)


def _seconds(doc):
    """How long the base's log ran: its calls over its calls per second."""
    m = {x["name"]: x for x in doc["metrics"]}
    calls, rate = m.get("calls", {}).get("base"), m.get("calls_per_s", {}).get("base")
    return calls / rate if calls and rate else None


def _swap(doc):
    return {"metrics": [dict(m, base=m["candidate"]) for m in doc["metrics"]]}


def calibrated(w, size, backend, say):
    """A size at which w runs about RUN_S seconds on `backend` on this machine now (one run
    timed; each backend its own, since they run one workload up to 4x apart): runs shorter
    than compare's 1.5 s have no memory metric judged from fewer than five logs a side, and a
    false-alarm count of pairs where nothing is judged says nothing."""
    a, _ = record(w, size, backend, f"cmp-{w.name}-cal")
    try:
        secs = _seconds(_compared(a, a))
    finally:
        os.remove(a)
    if not secs:
        return size
    scaled = int(size * min(40.0, max(1.0, RUN_S / secs)))
    say(f"compare false alarms: {w.name} on {backend} at {size} ran {secs:.2f} s; pairs run at {scaled}")
    return scaled


def false_alarms(smoke, say):
    ws = {w.name: w for w in wl.workloads()}
    logdir = os.path.join(wl.OUT, "logs")
    os.makedirs(logdir, exist_ok=True)
    pairs = []
    for name, size in PAIR_SIZES.items():
        w = ws[name]
        sizes = {}
        for k, backend in enumerate(PAIR_BACKENDS[:1] if smoke else PAIR_BACKENDS):
            if backend not in sizes:
                sizes[backend] = w.smoke if smoke else calibrated(w, PAIR_SIZES[name], backend, say)
            size = sizes[backend]
            tag = f"cmp-{name}-{k}"
            a, b = [], []
            for r in range(1 if smoke else RUNS_A_SIDE):  # in turns: A, B, A, B
                log, cmd = record(w, size, backend, f"{tag}-a{r}")
                a.append(log)
                b.append(record(w, size, backend, f"{tag}-b{r}")[0])
            doc = _compared(a, b)
            flagged = [{"metric": m["name"], "base": m["base"], "candidate": m["candidate"],
                        "relative": m["relative"], "interval": m["relative_interval"] or m["interval"]}
                       for m in doc["metrics"] if m["differs"]]
            judged = sum(1 for m in doc["metrics"] if m["judged"])
            durs = [m for m in doc["metrics"] if m["name"] == "calls_per_s"]
            pairs.append({"workload": name, "backend": backend, "size": size, "command": cmd, "runs_a_side": len(a),
                          "seconds": [_seconds(doc), _seconds(_swap(doc))],
                          "calls_per_s": [durs[0]["base"], durs[0]["candidate"]] if durs else None,
                          "judged": judged, "compared": sum(1 for m in doc["metrics"] if not m.get("not_compared")),
                          "flagged": flagged})
            say(f"compare false alarms: {name} on {backend}: {len(flagged)} of {judged} judged metrics flagged"
                + (f" ({', '.join(f['metric'] for f in flagged)})" if flagged else ""))
            for f in a + b:
                os.remove(f)
    return pairs


def measure_data(smoke=False, reps=None, say=lambda s: print(s, file=sys.stderr)):
    reps = reps or (1 if smoke else 3)
    events = 1_000_000 if smoke else int(os.environ.get("COMPARE_EVENTS", "100000000"))
    if not os.path.exists(GENLOG):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "shimlog", "--example", "genlog"], check=True, cwd=ROOT)
    sp = speed(events, reps, say)
    pairs = false_alarms(smoke, say)
    return {"speed": sp, "pairs": pairs}


def section(r):
    sp, pairs = r["speed"], r["pairs"]
    if sp is None:
        return sections.text([TITLE, "", f"(smoke: {len(pairs)} pairs compared, no speed part)"])
    x = sp["runs"]
    lines = sections.intro(TITLE, "python3 bench/compare.py --write", sp["reps"],
                           "medians; wall, CPU and peak RSS from wait4")
    lines += ["", f"Speed and memory: two synthetic logs of {sp['events']:,} events each "
              f"({sp['file_bytes'][0] / 2**20:.0f} and {sp['file_bytes'][1] / 2**20:.0f} MiB; "
              f"`{sp['made_by'][0]}`, and 150000 blocks live for the second), read by `stats` one at a time and "
              "by `compare` together (its bootstrap: 1000 resamples).", ""]
    lines += sections.table(["command", "wall", "CPU", "peak RSS", "walls"], [
        [f"`{sp['commands'][k].replace(ROOT + '/', '')}`", f"{x[k]['wall_s']:.2f} s", f"{x[k]['cpu_s']:.2f} s",
         f"{x[k]['max_rss_bytes'] / 2**20:.0f} MiB", ", ".join(f"{v:.2f}" for v in x[k]["walls"])]
        for k in ("stats_a", "stats_b", "compare")])
    ok_t = sp["time_ratio"] <= 1.5
    ok_m = sp["memory_ratio"] <= 1.25
    lines += ["", f"`compare`'s wall time is {sp['time_ratio']:.2f}x the two `stats` together (target: at most 1.5x: "
              f"{'met' if ok_t else 'NOT met'}); its CPU time {sp['cpu_ratio']:.2f}x theirs; its peak RSS "
              f"{sp['memory_ratio']:.2f}x the larger `stats`' (target: as `stats`: {'met' if ok_m else 'NOT met'})."]
    n_flag = sum(len(p["flagged"]) for p in pairs)
    judged = sum(p["judged"] for p in pairs)
    runs = max((p.get("runs_a_side", 1) for p in pairs), default=1)
    lines += ["", f"False alarms: {len(pairs)} pairs, each {runs} run{'s' if runs != 1 else ''} a side of the same "
              "workload, size and backend (recorded, default settings; sizes set by one timed run of each "
              f"workload on each backend to about {RUN_S:.0f} s), taken in turns, `shimlog compare A1 A2 --vs B1 B2 --json` at the default confidence "
              f"(95%): **{n_flag} metric{'s' if n_flag != 1 else ''} flagged** of {judged} judged over all pairs "
              f"(target: at most 1: {'met' if n_flag <= 1 else 'NOT met'}). Latency, stalls, calls_per_s and "
              "rss_end (one sample a run) are judged from five runs a side, the other memory metrics and calls from two, from runs of 1.5 s or more (a pair with 0 "
              "judged ran shorter under the machine's load); intervals from few runs are widened by Student's t "
              "(docs/compare.md). A flag (below) is a change between the sides' runs that their own spread did "
              "not cover: with two runs a side, a metric whose runs scatter widely (the demo's live bytes, set by "
              "how far its consumer threads fall behind under the machine's load) can land both base runs on one "
              "side of the candidate's.", ""]
    lines += sections.table(["workload", "backend", "size", "seconds (A, B)", "judged", "flagged"], [
        [p["workload"], p["backend"], str(p["size"]),
         ", ".join(f"{x:.1f}" for x in p.get("seconds") or [] if x) or "-", str(p["judged"]),
         ", ".join(f"{f['metric']} {100 * f['relative']:+.1f}%" if f["relative"] is not None else f["metric"]
                   for f in p["flagged"]) or "none"] for p in pairs])
    lines += ["", "Each pair's command (each run of either side, in turns): " + "; ".join(
        sorted({f"`{p['command'].replace(ROOT + '/', '')}`" for p in pairs if p['backend'] == 'glibc'}))]
    return sections.text(lines)


def measure(smoke=False, reps=None, say=lambda s: print(s, file=sys.stderr)):
    """The section's text (its data also in bench/out/compare.json)."""
    r = measure_data(smoke, reps, say)
    os.makedirs(wl.OUT, exist_ok=True)
    with open(os.path.join(wl.OUT, "compare.json"), "w") as f:
        json.dump(r, f, indent=1)
    return section(r)


if __name__ == "__main__":
    sections.main(measure, TITLE)
