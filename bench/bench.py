#!/usr/bin/env python3
"""The benchmark driver behind `make bench` (started by bench/run.sh, which builds the
workloads first).

  bench.py --full    every workload x backend x configuration, alternated run by run for
                     BENCH_ROUNDS rounds (default 5); heaptrack on smaller runs; the recorder
                     drain rate; callgrind instruction counts; the speed of shimlog stats on a
                     100 M-event log (STATS_EVENTS) and a demo capture of about 100 M events
                     (DEMO_ITERS iterations per thread). Prints the table,
                     writes bench/results.json and BENCHMARKS.md, and prints each headline
                     figure against the results.json it replaced (kept as
                     bench/out/results.prev.json; bench/drift.py), flagging those that moved
                     by more than their noise.
  bench.py --smoke   each bench program once, briefly, bare and under the shim, checking its
                     output and that its log decodes; the replay fidelity programs once each,
                     captured and replayed. Writes nothing outside bench/out/."""
import argparse
import dataclasses
import datetime
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backends  # noqa: E402
import columns  # noqa: E402
import compare  # noqa: E402
import idle  # noqa: E402
import inflight  # noqa: E402
import callgrind  # noqa: E402
import crashsafe  # noqa: E402
import drift  # noqa: E402
import fidelity  # noqa: E402
import stacks  # noqa: E402
import figures  # noqa: E402
import firefox  # noqa: E402
from groups import T_START, one_run, run_group, say  # noqa: E402
import ownalloc  # noqa: E402
import report  # noqa: E402
import report_export  # noqa: E402
import sampled  # noqa: E402
import threads  # noqa: E402
import verdict_fidelity  # noqa: E402
import runner  # noqa: E402
import sections  # noqa: E402
import stats_speed  # noqa: E402
import scale  # noqa: E402
from workloads import (BACKENDS, BIN, DEBIAN_PKG, OUT, ROOT, SHIM, SHIMLOG, bare_preload,  # noqa: E402
                       clean_env, launch, program_calls, shown, workloads)


# The bench scripts that measure a section of their own (each a module with TITLE and
# measure(smoke)), in the order BENCHMARKS.md shows them after the driver's own sections. A
# new section is one line here.
SECTION_SCRIPTS = [
    (stacks, "call stacks: unwinding cost and the SHIM_STACKS modes (bench/stacks.py)"),
    (sampled, "sampled-only recording: SHIM_RECORD=sample against SHIM_TRACE=0 (bench/sampled.py)"),
    (threads, "recording on many threads: 1, 2 and 8 threads (bench/threads.py)"),
    (columns, "columnar frames: SHIM_PACK=rows against SHIM_PACK=columns (bench/columns.py)"),
    (idle, "the recorder when the program is idle (bench/idle.py)"),
    (inflight, "dead processes' in-flight files: start-up beside them, a crash loop (bench/inflight.py)"),
    (scale, "analysis at scale: one pass, the decoding pool, window logs, export (bench/scale.py)"),
    (compare, "shimlog compare: its speed against stats, and false alarms on same-configuration pairs (bench/compare.py)"),
    (verdict_fidelity, "the replay's verdict with --rounds 3 against real runs (bench/verdict_fidelity.py)"),
    (firefox, "Firefox ESR's headless screenshot: bare, recorded, switched (bench/firefox.py)"),
]


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


def drain_rate(w, size, runs):
    """The recorder thread's throughput: events it wrote per second of its CPU time, with
    one thread producing as fast as it can and SHIM_ON_FULL=drop (so it never waits)."""
    res = []
    for i in range(runs):
        rec = one_run(w, size, "glibc", "rec", f"drain-{i}", extra_env={"SHIM_ON_FULL": "drop"},
                      threads=True, count="drops")
        tcpu = {int(k): v for k, v in rec.get("thread_cpu_ns", {}).items()}
        main = tcpu.pop(rec["pid"], None)
        recorder_ns = max(tcpu.values()) if tcpu else None
        d = {"ok": rec["ok"], "wall_s": rec["wall_s"], "events": rec.get("events"),
             "dropped": rec.get("dropped"), "recorder_cpu_s": recorder_ns / 1e9 if recorder_ns else None,
             "main_cpu_s": main / 1e9 if main else None, "log_bytes": rec.get("log_bytes"),
             "drops_at_ms": rec.get("drops_at_ms"),
             "raw_bytes": rec.get("raw_bytes")}
        if recorder_ns and rec.get("events"):
            d["events_per_recorder_cpu_s"] = rec["events"] / (recorder_ns / 1e9)
            d["offered_per_s"] = (rec["events"] + (rec.get("dropped") or 0)) / rec["wall_s"]
        res.append(d)
    rates = [d["events_per_recorder_cpu_s"] for d in res if d.get("events_per_recorder_cpu_s")]
    out = {"workload": w.name, "size": size, "runs": res,
           "command": shown(*launch(w, size, "glibc", "rec", "drain-N", {"SHIM_ON_FULL": "drop"})[:2])}
    if rates:
        out["events_per_s"] = figures.median(rates)
        out["min"], out["max"] = min(rates), max(rates)
        out["dropped_total"] = sum(d.get("dropped") or 0 for d in res)
    say(f"drain rate: {out.get('events_per_s', 0) / 1e6:.1f} M events/s of recorder CPU")
    return out


def zstd_levels(w, size, levels):
    """Log bytes per event of the one-thread workload at other SHIM_ZSTD_LEVELs (one run each)."""
    out = {}
    for lvl in levels:
        rec = one_run(w, size, "glibc", "rec", f"zstd-{lvl}", extra_env={"SHIM_ZSTD_LEVEL": str(lvl)})
        if rec["ok"] and rec.get("events_estimate"):
            out[str(lvl)] = {"bytes_per_event": rec["log_bytes"] / rec["events_estimate"],
                             "wall_s": rec["wall_s"], "cpu_s": rec["cpu_s"]}
    return out


def instruction_counts(w, sizes, configs):
    """Callgrind instruction counts of a workload at two sizes (see callgrind.py)."""
    if not callgrind.available():
        return {"skipped": "valgrind is not installed"}
    workdir = os.path.join(OUT, "callgrind", w.name)
    fresh_dir(workdir)

    def run_one(cfg, size, stem):
        argv, over, log_glob, _ = launch(w, size, "glibc", cfg, f"cg-{cfg}-{size}")
        env = clean_env()
        env.update(over)
        preload = env.pop("LD_PRELOAD", "")
        argv = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                f"--callgrind-out-file={stem}"] + argv
        m = runner.run(argv, env, os.path.join(OUT, "last-output.txt"), preload=preload, timeout_s=120)
        for p in glob.glob(os.path.join(OUT, "logs", f"cg-{cfg}-{size}.*")):
            os.remove(p)
        calls = program_calls(w, m["output"])
        if m["rc"] != 0 or calls is None:
            raise RuntimeError(f"callgrind run {cfg}/{size} failed: {m['output'][-200:]!r}")
        return calls

    try:
        res = callgrind.measure(run_one, sizes, configs, workdir)
    except (RuntimeError, OSError, ZeroDivisionError) as e:
        return {"skipped": str(e)}
    res["command"] = ("valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=STEM "
                      "(under each configuration's environment) " + shown(w.argv(sizes[1]), {}))
    say(f"callgrind {w.name}: done")
    return res


def clock_cost(pairs, repeats):
    """The in-loop cost of the shim's timestamps (bench/workloads/clock_cost.c)."""
    argv = [os.path.join(BIN, "clock_cost"), str(pairs), str(repeats)]
    m = runner.run(argv, clean_env(), os.path.join(OUT, "last-output.txt"))
    got = dict(re.findall(r"(\w+)=([\d.]+)", m["output"]))
    res = {"command": shown(argv, {}), "ns_per_pair": {k: float(v) for k, v in got.items()},
           "ok": m["rc"] == 0 and "none" in got}
    if not res["ok"]:
        say(f"clock_cost: unexpected output {m['output'][:120]!r}")
    return res


def machine():
    cpu, mhz = "unknown", None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and cpu == "unknown":
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("cpu MHz") and mhz is None:
                try:
                    mhz = float(line.split(":", 1)[1])
                except ValueError:
                    pass
    def pkg(name):
        p = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True)
        return p.stdout.strip() or None
    def tool_version(argv):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (p.stdout or p.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu, "cpu_mhz": mhz, "cores": os.cpu_count(), "kernel": platform.release(),
        "loadavg_start": open("/proc/loadavg").read().split()[:3],
        "glibc": platform.libc_ver()[1],
        "debian_libjemalloc2": pkg("libjemalloc2"), "debian_libmimalloc2.0": pkg("libmimalloc2.0"),
        "heaptrack": tool_version(["heaptrack", "--version"]),
        "gcc": tool_version(["gcc", "--version"]),
        "python3": tool_version([workloads_python(), "--version"]),
        "git_commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True).stdout.strip(),
    }


def workloads_python():
    from workloads import python3
    return python3()


def full():
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    if rounds < 5:
        say(f"BENCH_ROUNDS={rounds}: fewer than the 5 pairs the figures are meant to have")
    fresh_dir(os.path.join(OUT, "logs"))
    fresh_dir(os.path.join(OUT, "ht"))
    info = machine()
    ws = workloads()
    have_ht = shutil.which("heaptrack") is not None
    skipped = []
    groups = []
    for w in ws:
        for b in BACKENDS:
            if bare_preload(b) is None:
                skipped.append(f"{w.name}/{b}: Debian's {DEBIAN_PKG[b]} is not installed, no bare baseline")
                continue
            groups.append(run_group(w, b, w.full, ("bare", "off", "rec", "rec_all"), rounds, "full",
                                    exact=b == "glibc"))
        if have_ht:
            cfgs = ("bare", "heaptrack", "heaptrack_3x") if w.scalable else ("bare", "rec", "heaptrack")
            groups.append(run_group(w, "glibc", w.ht, cfgs, rounds, "heaptrack", exact=False))
        else:
            skipped.append(f"{w.name}/heaptrack: heaptrack is not installed")
    single = next(w for w in ws if w.name == "single")
    drain = drain_rate(single, single.full // 2, 3)
    cg = instruction_counts(single, (50_000, 150_000), ("bare", "off", "rec", "rec_all"))
    demo = next((w for w in ws if w.name == "demo"), None)
    cg_demo = None
    if demo:
        # one thread: with several, which paths the allocator takes varies from run to run
        # (callgrind runs threads one at a time), and so do the counts
        demo1 = dataclasses.replace(demo, argv=lambda n: [os.path.join(BIN, "demo"), "1", str(n)])
        cg_demo = instruction_counts(demo1, (10_000, 30_000), ("bare", "off", "rec"))
    clocks = clock_cost(500_000, 7)
    levels = zstd_levels(single, single.full // 2, (3, 9))
    stats = stats_speed.measure(5, say)
    own = ownalloc.measure(rounds, say)
    crash = crashsafe.measure(rounds, say)
    rex = report_export.measure(3, say)
    bks = backends.measure(rounds, say)
    say("replay fidelity: real runs per backend against one capture's replay")
    fid = fidelity.measure(smoke=False, rounds=3, say=say)
    info["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    info["bench_seconds"] = round(time.monotonic() - T_START, 1)
    results = {"machine": info, "rounds": rounds, "skipped": skipped, "groups": groups,
               "drain": drain, "callgrind": cg, "callgrind_demo": cg_demo, "clock_cost": clocks,
               "zstd_levels": levels, "stats_speed": stats, "ownalloc": own, "crashsafe": crash,
               "fidelity": fid, "report_export": rex, "backends": bks,
               "workloads": {w.name: w.title for w in ws},
               "commands": {"make bench": "bash bench/run.sh",
                            "build": "cc -O2 -pthread -o bench/out/bin/NAME bench/workloads/NAME.c "
                                     "(and workloads/demo.c)"}}
    results["targets"] = report.targets(results)
    # The sections of their own scripts, measured now, in the order BENCHMARKS.md shows them;
    # then results.json and BENCHMARKS.md are written once, whole, from this run alone.
    for mod, what in SECTION_SCRIPTS:
        say(what)
        sections.record(results, mod.TITLE, mod.measure(smoke=False))
    # The run this one replaces, kept for the comparison printed at the end (bench/drift.py).
    prev_path = os.path.join(OUT, "results.prev.json")
    try:
        shutil.copyfile(os.path.join(ROOT, "bench", "results.json"), prev_path)
    except OSError:
        prev_path = None
    with open(os.path.join(ROOT, "bench", "results.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=False)
        f.write("\n")
    md = report.markdown(results)
    with open(os.path.join(ROOT, "BENCHMARKS.md"), "w") as f:
        f.write(md)
    print(report.table(results))
    if prev_path:
        print()
        try:
            prev = drift.load(prev_path)
            print(drift.render(*drift.compare(prev, results), drift.name_of(prev, "the previous results.json"),
                               drift.name_of(results, "this run")))
        except (OSError, ValueError) as e:
            say(f"no comparison with the previous results.json: {e}")
    say(f"wrote BENCHMARKS.md and bench/results.json in {info['bench_seconds']} s")
    return 0


def smoke():
    """Each program once at a small size: bare, and recording under two backends, plus
    SHIM_TRACE=0 and heaptrack once; output checked, logs decoded and counted."""
    fresh_dir(os.path.join(OUT, "logs"))
    fresh_dir(os.path.join(OUT, "ht"))
    failures = 0
    n = 0
    if not shutil.which("heaptrack"):
        # Not run is not passed: make test installs it (tools/test-deps.sh).
        say("smoke: cannot run the heaptrack configuration: heaptrack is missing (apt-get install heaptrack)")
        failures += 1
    for w in workloads():
        plan = [("glibc", "bare"), ("glibc", "rec"), ("jemalloc", "off"), ("mimalloc", "rec")]
        if w.name == "single" and shutil.which("heaptrack"):
            plan.append(("glibc", "heaptrack"))
        for b, cfg in plan:
            rec = one_run(w, w.smoke, b, cfg, f"smoke-{w.name}-{b}-{cfg}", count=cfg == "rec")
            n += 1
            calls, events = rec.get("program_calls"), rec.get("events")
            if rec["ok"] and cfg == "rec" and calls is not None and not (calls <= events <= calls + 64):
                rec["ok"] = False
                say(f"{w.name}/{b}/{cfg}: the log has {events} malloc-family events, the program made {calls} calls")
            # Slow calls' stacks (SHIM_STACKS=slow, the default) add records of their own: a
            # few dozen per slow call, as many as the loaded machine makes slow.
            if rec["ok"] and cfg == "rec" and events is not None and \
                    not -4 <= rec["events_estimate"] - events <= 4 + events // 100:
                rec["ok"] = False
                say(f"{w.name}/{b}/{cfg}: frame headers say about {rec['events_estimate']} events, "
                    f"shimlog counts {events}: bench/logs.py's estimate is off")
            if rec["ok"] and cfg == "rec" and w.kind != "startup" and not events:
                rec["ok"] = False
                say(f"{w.name}/{b}/{cfg}: the log holds no malloc-family events")
            failures += not rec["ok"] or bool(rec.get("problems"))
    c = clock_cost(10_000, 1)
    n += 1
    failures += not c["ok"]
    # Replay fidelity at a small size: every program runs under each backend, is captured
    # and replayed; a program that fails or a replay that errs fails the smoke.
    try:
        fid = fidelity.measure(smoke=True, rounds=1, say=say, touch_modes=False)
        n += len(fid["programs"])
        for r in fid["programs"]:
            if r["ops_replayed"] != r["ops_planned"]:
                failures += 1
                say(f"fidelity {r['name']}: replayed {r['ops_replayed']} ops of the plan's {r['ops_planned']}")
    except Exception as e:  # noqa: BLE001 (any failure of the run is the smoke's failure)
        n += 1
        failures += 1
        say(f"fidelity smoke failed: {e}")
    # The scripts that write a section of their own, once at their smoke sizes.
    for mod, what in SECTION_SCRIPTS:
        n += 1
        try:
            mod.measure(smoke=True)
        except Exception as e:  # noqa: BLE001
            failures += 1
            say(f"{what} smoke failed: {e}")
    say(f"smoke: {n - failures} of {n} runs ok")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--full", action="store_true")
    mode.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    for f in (SHIM, SHIMLOG):
        if not os.path.exists(f):
            print(f"bench: {os.path.relpath(f, ROOT)} is missing: run 'make build' first", file=sys.stderr)
            return 1
    if not os.path.isdir(BIN):
        print("bench: bench/out/bin is missing: run bench/run.sh, which builds the workloads", file=sys.stderr)
        return 1
    return smoke() if a.smoke else full()


if __name__ == "__main__":
    sys.exit(main())
