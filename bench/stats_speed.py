"""How fast `shimlog stats` reads, and how much memory it takes (the analysis issue's
numbers: at least 20 M events per second on one core; well under 1 GB for hundreds of
millions of events).

Two logs: a synthetic one of STATS_EVENTS events (default 100 M) written by the genlog
example (8 threads interleaved in time, about 100 000 blocks live, frees of random live
blocks so most are cross-thread), and a real capture of the demo workload (4 threads x
2 000 000 iterations, about 14 M events). Each is analysed `rounds` times; shimlog stats is
single-threaded, so its rate per CPU second is its rate on one core."""
import glob
import json
import os
import subprocess

import runner
from workloads import BIN, OUT, ROOT, SHIM, SHIMLOG, clean_env, shown

GENLOG = os.path.join(ROOT, "target", "release", "examples", "genlog")
DIR = os.path.join(OUT, "stats")


def _events(log):
    """The events shimlog stats counts in the log (from its --json report)."""
    p = subprocess.run([SHIMLOG, "stats", "--json", log], capture_output=True, timeout=600)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout).get("events")


def _logs(events, say):
    os.makedirs(DIR, exist_ok=True)
    for f in glob.glob(os.path.join(DIR, "*.shimlog")):
        os.remove(f)
    out = []
    syn = os.path.join(DIR, "synthetic.shimlog")
    argv = [GENLOG, syn, str(events)]
    subprocess.run(argv, check=True, capture_output=True, timeout=600)
    out.append({"name": "synthetic", "log": syn, "made_by": shown(argv, {})})
    env = clean_env()
    env["SHIM_LOG"] = os.path.join(DIR, "demo.%p.shimlog")
    argv = [os.path.join(BIN, "demo"), "4", "2000000"]
    subprocess.run(argv, check=True, capture_output=True, timeout=600,
                   env=dict(env, LD_PRELOAD=SHIM))
    demo = glob.glob(os.path.join(DIR, "demo.*.shimlog"))
    if demo:
        out.append({"name": "demo capture", "log": demo[0],
                    "made_by": shown(argv, {"LD_PRELOAD": SHIM, "SHIM_LOG": env["SHIM_LOG"]})})
    for x in out:
        x["file_bytes"] = os.path.getsize(x["log"])
        x["events"] = _events(x["log"])
        say(f"stats speed: {x['name']} log, {x['events']} events, {x['file_bytes'] / 2**20:.0f} MiB")
    return out


def measure(rounds, say, events=None):
    if not os.access(GENLOG, os.X_OK):
        return {"skipped": f"{os.path.relpath(GENLOG, ROOT)} is missing (bench/run.sh builds it)"}
    events = events or int(os.environ.get("STATS_EVENTS", "100000000"))
    logs = _logs(events, say)
    for x in logs:
        runs = []
        for i in range(rounds):
            m = runner.run([SHIMLOG, "stats", x["log"]], clean_env(), os.path.join(OUT, "last-output.txt"))
            if m["rc"] != 0:
                runs.append({"ok": False, "rc": m["rc"]})
                continue
            runs.append({"ok": True, "wall_s": m["wall_s"], "cpu_s": m["cpu_s"], "maxrss_kb": m["maxrss_kb"]})
        ok = [r for r in runs if r["ok"]]
        x["runs"] = runs
        x["command"] = f"/usr/bin/time -v target/release/shimlog stats {os.path.relpath(x['log'], ROOT)}"
        if ok and x["events"]:
            cpu = sorted(r["cpu_s"] for r in ok)
            x["cpu_s"] = cpu[len(cpu) // 2]
            x["wall_s"] = sorted(r["wall_s"] for r in ok)[len(ok) // 2]
            x["events_per_cpu_s"] = x["events"] / x["cpu_s"]
            x["rates"] = [x["events"] / c for c in cpu]
            x["maxrss_kb"] = max(r["maxrss_kb"] for r in ok)
            say(f"stats speed: {x['name']}: {x['events_per_cpu_s'] / 1e6:.1f} M events per CPU second, "
                f"max RSS {x['maxrss_kb'] / 1024:.0f} MiB")
        os.remove(x["log"])
    return {"rounds": rounds, "logs": logs}
