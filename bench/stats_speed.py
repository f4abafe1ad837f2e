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
thread: the rate per wall second on this machine), alternated.

Where the one-thread time goes, also round by round: the zstdspeed example (decompression
alone) and the readspeed example (the whole reader: decompression, decoding, the merge of the
thread streams) on the synthetic log and on the same workload written by one thread (one
stream: nearly no merge). Per event: zstd = zstdspeed's CPU time; decoding = readspeed's
minus zstdspeed's on the one-thread log; the merge = the same difference on the 8-thread log,
less the decoding; the analysis = stats --one-thread's minus readspeed's, on the 8-thread log."""
import glob
import json
import os
import subprocess

import runner
from workloads import BIN, OUT, ROOT, SHIM, SHIMLOG, clean_env, shown

GENLOG = os.path.join(ROOT, "target", "release", "examples", "genlog")
ZSTDSPEED = os.path.join(ROOT, "target", "release", "examples", "zstdspeed")
READSPEED = os.path.join(ROOT, "target", "release", "examples", "readspeed")
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
    # The synthetic workload from one thread, for the reader's stages (not analysed).
    one = os.path.join(DIR, "synthetic-1.shimlog")
    argv = [GENLOG, one, str(events), "1"]
    subprocess.run(argv, check=True, capture_output=True, timeout=600)
    stages = {"log": one, "made_by": shown(argv, {})}
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
    stages["events"] = _events([one])
    return out, stages


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
    logs, stages = _logs(events, say)
    one_log = stages["log"]
    stage_tools = all(os.access(t, os.X_OK) for t in (ZSTDSPEED, READSPEED))
    stage_runs = []
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
        if stage_tools:
            stage_runs.append(_stage_round(logs[0], stages))
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
    stages = _stages(logs[0], stages, stage_runs, say) if stage_tools else \
        {"skipped": "the zstdspeed and readspeed examples are missing (bench/run.sh builds them)"}
    for f in {f for x in logs for f in x["logs"]} | {one_log}:
        os.remove(f)
    return {"rounds": rounds, "logs": logs, "stages": stages}


def _cpu(argv):
    """CPU seconds of one run of argv, None if it failed."""
    m = runner.run(argv, clean_env(), os.path.join(OUT, "last-output.txt"))
    return m["cpu_s"] if m["rc"] == 0 else None


def _stage_round(base, stages):
    """One round of the stage runs: zstd alone and the whole reader, on the 8-thread
    synthetic log and on the one-thread one; with the round's stats --one-thread run of the
    8-thread log (just made, side by side)."""
    log8, log1 = base["logs"][0], stages["log"]
    r = {"zstd8": _cpu([ZSTDSPEED, log8]), "read8": _cpu([READSPEED, log8]),
         "zstd1": _cpu([ZSTDSPEED, log1]), "read1": _cpu([READSPEED, log1])}
    last = base["runs"]["one"][-1] if base["runs"]["one"] else {}
    r["stats8"] = last.get("cpu_s") if last.get("ok") else None
    return r


def _stages(base, stages, runs, say):
    """ns per event of each stage, the median of the rounds' figures (see the docstring)."""
    n8, n1 = base["events"], stages["events"]
    per = {"zstd": [], "decode": [], "merge": [], "analysis": [], "total": []}
    for r in runs:
        if None in r.values() or not (n8 and n1):
            continue
        decode = (r["read1"] - r["zstd1"]) / n1
        per["zstd"].append(r["zstd8"] / n8)
        per["decode"].append(decode)
        per["merge"].append((r["read8"] - r["zstd8"]) / n8 - decode)
        per["analysis"].append((r["stats8"] - r["read8"]) / n8)
        per["total"].append(r["stats8"] / n8)
    out = dict(stages, runs=runs)
    if per["total"]:
        out["ns_per_event"] = {k: sorted(v)[len(v) // 2] * 1e9 for k, v in per.items()}
        say("stats speed stages, ns per event: " +
            ", ".join(f"{k} {v:.1f}" for k, v in out["ns_per_event"].items()))
    out["commands"] = [f"target/release/examples/{t} {os.path.relpath(f, ROOT)}"
                       for t in ("zstdspeed", "readspeed") for f in (base["logs"][0], stages["log"])]
    return out
