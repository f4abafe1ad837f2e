"""Crash-safe buffers (the process-death issue's numbers): what it costs to keep the threads'
buffers in the in-flight file beside the log (the default) rather than on the heap
(SHIM_CRASH_SAFE=0), and how much disk that file takes.

For the one-thread and the two-thread (producer/consumer) workloads and the demo (4
threads), under each backend, the two configurations run alternately, once each a round, in
an order swapped from round to round; cost per event = (crash-safe - heap) / events, paired
by round, in wall time and in CPU time (all threads: the recorder's included). Medians
(min-max). Disk: the demo under the shim, the in-flight file's allocated blocks
(st_blocks) sampled every 5 ms while it runs; the most it held, per thread that recorded.

Alone: python3 bench/crashsafe.py [ROUNDS] (prints the markdown section)."""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner  # noqa: E402
from workloads import BACKENDS, OUT, SHIM, clean_env, shown, workloads  # noqa: E402

DIR = os.path.join(OUT, "crashsafe")
CONFIGS = {"file": {}, "heap": {"SHIM_CRASH_SAFE": "0"}}
NAMES = ("single", "prodcons", "demo")


def _events(path):
    """Records in a log, from its frame headers (bench/logs.py reads them the same way)."""
    import logs
    return logs.frames(path)["records"]


def _run(w, size, backend, cfg, tag):
    env = clean_env()
    env.update(w.env)
    env.update(CONFIGS[cfg])
    env["SHIM_BACKEND"] = backend
    env["SHIM_LOG"] = os.path.join(DIR, f"{tag}.%p.shimlog")
    m = runner.run(w.argv(size), env, os.path.join(DIR, "last-output.txt"), preload=SHIM)
    logs = [os.path.join(DIR, f) for f in os.listdir(DIR) if f.startswith(tag + ".") and f.endswith(".shimlog")]
    events = sum(_events(p) for p in logs)
    left = [f for f in os.listdir(DIR) if f.startswith(tag + ".") and f.endswith(".inflight")]
    for p in logs:
        os.remove(p)
    return {"wall_s": m["wall_s"], "cpu_s": m["cpu_s"], "events": events,
            "ok": m["rc"] == 0 and events > 0 and not left}


def _median_range(xs):
    return (statistics.median(xs), min(xs), max(xs)) if xs else (None, None, None)


def disk(w, size):
    """The demo under the shim: the in-flight file's disk use, sampled while it runs."""
    env = clean_env()
    env.update(w.env)
    env["LD_PRELOAD"] = SHIM
    env["SHIM_LOG"] = os.path.join(DIR, "disk.%p.shimlog")
    p = subprocess.Popen(w.argv(size), env=env, stdout=subprocess.DEVNULL)
    log = os.path.join(DIR, f"disk.{p.pid}.shimlog")
    path = None
    most = apparent = 0
    while p.poll() is None:
        try:
            if path is None:
                # The log's header names the in-flight file (on tmpfs, or beside the log).
                import logs
                path = logs.frames(log)["header"].get("inflight") or log + ".inflight"
            st = os.stat(path)
            most, apparent = max(most, st.st_blocks * 512), st.st_size
        except (OSError, ValueError):
            pass
        time.sleep(0.002)
    for f in os.listdir(DIR):
        if f.startswith("disk."):
            os.remove(os.path.join(DIR, f))
    return {"max_bytes": most, "apparent_bytes": apparent, "threads": 5,
            "command": shown(w.argv(size), {"LD_PRELOAD": SHIM, "SHIM_LOG": env["SHIM_LOG"]})}


def measure(rounds, say):
    os.makedirs(DIR, exist_ok=True)
    ws = {w.name: w for w in workloads() if w.name in NAMES}
    out = {"rounds": rounds, "rows": [], "ok": True}
    for name in NAMES:
        w = ws[name]
        size = w.full // 2
        for b in BACKENDS:
            runs = {c: [] for c in CONFIGS}
            for r in range(rounds):
                order = list(CONFIGS) if r % 2 == 0 else list(CONFIGS)[::-1]
                for c in order:
                    runs[c].append(_run(w, size, b, c, f"{name}-{b}-{c}-{r}"))
            ok = all(x["ok"] for c in runs for x in runs[c])
            out["ok"] &= ok
            ev = statistics.median([x["events"] for x in runs["file"]])
            pair = list(zip(runs["file"], runs["heap"]))
            wall = [(f["wall_s"] - h["wall_s"]) / ev * 1e9 for f, h in pair]
            cpu = [(f["cpu_s"] - h["cpu_s"]) / ev * 1e9 for f, h in pair]
            row = {"workload": name, "backend": b, "events": ev, "ok": ok,
                   "wall_ns": _median_range(wall), "cpu_ns": _median_range(cpu),
                   "file_cpu_ns_per_event": statistics.median([x["cpu_s"] / ev * 1e9 for x in runs["file"]]),
                   "heap_cpu_ns_per_event": statistics.median([x["cpu_s"] / ev * 1e9 for x in runs["heap"]]),
                   "command": shown(w.argv(size), {"LD_PRELOAD": SHIM, "SHIM_BACKEND": b, "SHIM_CRASH_SAFE": "0|1"})}
            out["rows"].append(row)
            say(f"crash-safe buffers {name}/{b}: {row['wall_ns'][0]:+.2f} ns/event wall, "
                f"{row['cpu_ns'][0]:+.2f} ns/event CPU")
    out["disk"] = disk(ws["demo"], ws["demo"].full)
    return out


def _f(x, nd=2):
    return "-" if x is None else f"{x:+.{nd}f}"


def markdown(o):
    L = ["## Crash-safe buffers\n"]
    if not o:
        L.append("Not measured in this run.\n")
        return L
    L.append("The threads' buffers in the in-flight file (the default, on tmpfs: a process that "
             "dies leaves them recoverable) against on the heap (`SHIM_CRASH_SAFE=0`), recording; "
             f"{o['rounds']} rounds, the two alternating; cost per event paired by round, medians "
             "(min-max). CPU time counts every thread, the recorder's included. "
             "Target: at most 1 ns per event more. Alone: `python3 bench/crashsafe.py`.\n")
    L.append("| workload | backend | events | wall ns/event more | CPU ns/event more | CPU ns/event (file, heap) |")
    L.append("|---|---|---|---|---|---|")
    for r in o["rows"]:
        w, c = r["wall_ns"], r["cpu_ns"]
        L.append(f"| {r['workload']} | {r['backend']} | {r['events']:,.0f} | {_f(w[0])} ({_f(w[1])} to {_f(w[2])}) "
                 f"| {_f(c[0])} ({_f(c[1])} to {_f(c[2])}) | {r['file_cpu_ns_per_event']:.1f}, "
                 f"{r['heap_cpu_ns_per_event']:.1f} |")
    d = o["disk"]
    L.append("")
    L.append(f"Disk: the demo (4 allocating threads, the main thread and the recorder's process records) "
             f"held at most **{d['max_bytes'] / 1024:.0f} KiB** in its in-flight file (tmpfs memory) "
             f"({d['max_bytes'] / d['threads'] / 1024:.0f} KiB per thread; the file is sparse, "
             f"{d['apparent_bytes'] >> 20} MiB apparent, its slots reused and never added, and deleted "
             f"at exit). Command: `{d['command']}`.\n")
    return L


if __name__ == "__main__":
    res = measure(int(sys.argv[1]) if len(sys.argv) > 1 else 5, lambda m: print(m, file=sys.stderr))
    import json
    with open(os.path.join(DIR, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("\n".join(markdown(res)))
