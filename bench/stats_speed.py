"""How fast `shimlog stats` reads, and how much memory it takes (the analysis issue's
numbers: at least 20 M events per second on one core; well under 1 GB for hundreds of
millions of events).

Logs of STATS_EVENTS events each (default 100 M): synthetic ones written by the genlog example
(8 threads interleaved in time, about 100 000 blocks live, frees of random live blocks so
most are cross-thread); the same with 64 threads (a large server's thread count: the merge
has 8 times the streams); the same 8 threads with frames compressed at zstd level -1, as
SHIM_ZSTD_LEVEL=-1 writes them (no Huffman coding: larger logs, cheaper to decompress); and a
real capture of the demo workload (4 threads x DEMO_ITERS iterations, default 14 100 000:
about 100 M events); and the first synthetic log and the demo capture read together, as a
parent's and its children's logs are (a section each and their total). Each is analysed `rounds` times with --one-thread (its rate per CPU
second is the rate on one core) and `rounds` times the default way (the reader on a second
thread: the rate per wall second on this machine), alternated."""
import glob
import json
import os
import subprocess

import runner
from workloads import BIN, OUT, ROOT, SHIM, SHIMLOG, clean_env, shown

GENLOG = os.path.join(ROOT, "target", "release", "examples", "genlog")
DIR = os.path.join(OUT, "stats")


def _events(logs):
    """The events shimlog stats counts in the logs (from its --json report: their total)."""
    p = subprocess.run([SHIMLOG, "stats", "--json"] + logs, capture_output=True, timeout=600)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout).get("events")


def _logs(events, say):
    os.makedirs(DIR, exist_ok=True)
    for f in glob.glob(os.path.join(DIR, "*.shimlog")):
        os.remove(f)
    out = []
    # (name, file, genlog's THREADS LIVE LEVEL)
    for name, stem, extra in (("synthetic", "synthetic", []),
                              ("synthetic, 64 threads", "synthetic-64", ["64"]),
                              ("synthetic, zstd -1", "synthetic-z-1", ["8", "100000", "-1"])):
        syn = os.path.join(DIR, stem + ".shimlog")
        argv = [GENLOG, syn, str(events)] + extra
        subprocess.run(argv, check=True, capture_output=True, timeout=600)
        out.append({"name": name, "logs": [syn], "made_by": shown(argv, {})})
    env = clean_env()
    env["SHIM_LOG"] = os.path.join(DIR, "demo.%p.shimlog")
    argv = [os.path.join(BIN, "demo"), "4", os.environ.get("DEMO_ITERS", "14100000")]
    subprocess.run(argv, check=True, capture_output=True, timeout=600,
                   env=dict(env, LD_PRELOAD=SHIM))
    demo = glob.glob(os.path.join(DIR, "demo.*.shimlog"))
    if demo:
        out.append({"name": "demo capture", "logs": [demo[0]],
                    "made_by": shown(argv, {"LD_PRELOAD": SHIM, "SHIM_LOG": env["SHIM_LOG"]})})
    if demo:
        # Several logs read together (as a parent's and its children's are): a section each
        # and their total, one merge of both logs' events.
        out.append({"name": "synthetic and demo capture together",
                    "logs": out[0]["logs"] + out[-1]["logs"], "made_by": "the two logs above"})
    for x in out:
        x["file_bytes"] = sum(os.path.getsize(f) for f in x["logs"])
        x["events"] = _events(x["logs"])
        say(f"stats speed: {x['name']} log, {x['events']} events, {x['file_bytes'] / 2**20:.0f} MiB")
    return out


def _summary(runs):
    """Medians of CPU and wall seconds (and their sorted lists), the largest max RSS; None
    when no run succeeded."""
    ok = [r for r in runs if r["ok"]]
    if not ok:
        return None
    cpus = sorted(r["cpu_s"] for r in ok)
    walls = sorted(r["wall_s"] for r in ok)
    return {"cpu_s": cpus[len(cpus) // 2], "wall_s": walls[len(walls) // 2], "cpus": cpus,
            "walls": walls, "maxrss_kb": max(r["maxrss_kb"] for r in ok)}


# Per mode: the prefix of its keys, the time its rate is per (one thread: CPU, the default:
# wall), the key of its per-run rates, and how the rate is said.
_MODES = {"one": ("", "cpu", "rates", "per CPU second on one thread"),
          "two": ("two_", "wall", "two_wall_rates", "per wall second with the reader thread")}


def _record(x, mode, s, say):
    """Puts a mode's summary `s` (None: no run succeeded) into the log's entry `x`."""
    if not (s and x["events"]):
        return
    pre, per, rates, said = _MODES[mode]
    for k in ("cpu_s", "wall_s", "maxrss_kb"):
        x[pre + k] = s[k]
    rate = x[f"{pre}events_per_{per}_s"] = x["events"] / s[per + "_s"]
    x[rates] = [x["events"] / v for v in s[per + "s"]]
    say(f"stats speed: {x['name']}: {rate / 1e6:.1f} M events {said}, "
        f"max RSS {s['maxrss_kb'] / 1024:.0f} MiB")


def measure(rounds, say, events=None):
    if not os.access(GENLOG, os.X_OK):
        return {"skipped": f"{os.path.relpath(GENLOG, ROOT)} is missing (bench/run.sh builds it)"}
    events = events or int(os.environ.get("STATS_EVENTS", "100000000"))
    logs = _logs(events, say)
    # Round by round over every log, so that the logs are compared side by side (the
    # machine's neighbours change its speed from minute to minute); in each, --one-thread
    # (the rate on one core), then the default (the reader on a second thread: the
    # wall-clock rate on this machine).
    for x in logs:
        x["runs"] = {"one": [], "two": []}
    for i in range(rounds):
        for x in logs:
            for mode, extra in (("one", ["--one-thread"]), ("two", [])):
                m = runner.run([SHIMLOG, "stats"] + extra + x["logs"], clean_env(),
                               os.path.join(OUT, "last-output.txt"))
                if m["rc"] != 0:
                    x["runs"][mode].append({"ok": False, "rc": m["rc"]})
                    continue
                x["runs"][mode].append({"ok": True, "wall_s": m["wall_s"], "cpu_s": m["cpu_s"],
                                        "maxrss_kb": m["maxrss_kb"]})
    base = logs[0]
    for x in logs:
        rel = " ".join(os.path.relpath(f, ROOT) for f in x["logs"])
        x["command"] = f"/usr/bin/time -v target/release/shimlog stats --one-thread {rel}"
        x["command_two"] = f"/usr/bin/time -v target/release/shimlog stats {rel}"
        for mode in ("one", "two"):
            _record(x, mode, _summary(x["runs"][mode]), say)
        # One-thread rate against the first log's in the same round: the median of the
        # rounds' ratios.
        pairs = [(a, b) for a, b in zip(x["runs"]["one"], base["runs"]["one"])
                 if a["ok"] and b["ok"]]
        if x is not base and pairs and x["events"] and base["events"]:
            r = sorted((x["events"] / a["cpu_s"]) / (base["events"] / b["cpu_s"]) for a, b in pairs)
            x["rate_vs_first"] = r[len(r) // 2]
            say(f"stats speed: {x['name']}: {x['rate_vs_first']:.2f}x the {base['name']} log's "
                "rate on one thread (median of the rounds' ratios)")
    for f in {f for x in logs for f in x["logs"]}:
        os.remove(f)
    return {"rounds": rounds, "logs": logs}
