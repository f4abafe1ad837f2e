"""Running the bench programs: one configuration once (one_run: timed, its output and logs
checked) and a group of configurations alternated run by run over rounds (run_group), with
the driver's progress lines (say). Shared by bench.py (the driver) and backends.py, so that
neither imports the other."""
import glob
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figures  # noqa: E402
import logs  # noqa: E402
import runner  # noqa: E402
from workloads import OUT, SHIMLOG, clean_env, launch, program_calls, shown  # noqa: E402

T_START = time.monotonic()


def say(msg):
    print(f"[bench {time.monotonic() - T_START:6.1f}s] {msg}", file=sys.stderr, flush=True)


def one_run(w, size, backend, config, tag, extra_env=None, threads=False, count=False):
    """Runs one configuration once; returns the run's record (no program output kept)."""
    argv, over, log_glob, ht_stem = launch(w, size, backend, config, tag, extra_env)
    env = clean_env()
    env.update(over)
    preload = env.pop("LD_PRELOAD", "")
    m = runner.run(argv, env, os.path.join(OUT, "last-output.txt"), preload=preload, threads=threads)
    rec = {"workload": w.name, "backend": backend, "config": config, "size": size,
           "wall_s": m["wall_s"], "cpu_s": m["cpu_s"], "maxrss_kb": m["maxrss_kb"], "rc": m["rc"]}
    for k in ("thread_cpu_ns", "pid"):
        if k in m:
            rec[k] = m[k]
    problems = []
    if m["rc"] != 0:
        problems.append(f"exit status {m['rc']}")
    out = m["output"]
    if config.startswith("heaptrack"):
        mm = re.search(r"allocations:\s+(\d+)", out)
        rec["heaptrack_allocations"] = int(mm.group(1)) if mm else None
        files = glob.glob(ht_stem + "*")
        rec["ht_bytes"] = sum(os.path.getsize(f) for f in files)
        if not files:
            problems.append("heaptrack wrote no output file")
        for f in files:
            os.remove(f)
        # heaptrack's own chatter surrounds the program's output
        body = "\n".join(l for l in out.splitlines() if not re.match(
            r"^(heaptrack|starting application|Heaptrack finished|\s+heaptrack --analyze|\s*$|"
            r"/usr/lib/heaptrack|\t\w[\w ]*:\s*\d+)", l))
    else:
        body = "\n".join(l for l in out.splitlines() if not l.startswith("shim:"))
    shim_lines = [l for l in out.splitlines() if l.startswith("shim:")]
    wrong = []  # the program completed, but its output says something went wrong
    if not config.startswith("heaptrack") and shim_lines:
        wrong.append("the shim said: " + shim_lines[0])
    if not re.search(w.expect, body.strip(), re.M | re.S):
        wrong.append(f"unexpected output {body.strip()[:120]!r}")
    rec["program_calls"] = program_calls(w, out)
    if log_glob:
        paths = sorted(glob.glob(log_glob))
        if config == "off":
            if paths:
                problems.append("SHIM_TRACE=0 wrote a log")
        else:
            if not paths:
                problems.append("no log written")
            info = [logs.frames(p) for p in paths]
            rec["logs"] = len(paths)
            rec["log_bytes"] = sum(i["file_bytes"] for i in info)
            rec["raw_bytes"] = sum(i["raw_bytes"] for i in info)
            rec["records"] = sum(i["records"] for i in info)
            rec["frames"] = sum(i["frames"] for i in info)
            rec["events_estimate"] = logs.estimate_events(info)
            if info:
                rec["backend_version"] = info[0]["header"].get("backend_version")
            if not all(i["clean"] for i in info):
                problems.append("a log does not end on a whole frame")
            if count == "drops" and paths:
                rec["events"], rec["dropped"], rec["count_method"], drops = \
                    logs.count_events(SHIMLOG, paths, need_drops=True)
                rec["drops_at_ms"] = [[round(t / 1e6, 1) if t is not None else None, n] for t, n in drops]
            elif count and paths:
                rec["events"], rec["dropped"], rec["count_method"] = logs.count_events(SHIMLOG, paths)
        for p in paths:
            os.remove(p)
    # ok: the run completed and can be timed; wrong output is reported, not hidden
    rec["ok"] = not problems
    if problems or wrong:
        rec["problems"] = problems + wrong
        say(f"{w.name}/{backend}/{config}: " + "; ".join(problems + wrong))
    return rec


def run_group(w, backend, size, configs, rounds, label, exact):
    """Alternates the configurations run by run: round r runs them rotated by r.

    Events per run: from the logs' frame headers (logs.estimate_events), and with `exact`
    also counted by shimlog on the first recording run, which checks the estimate."""
    g = {"workload": w.name, "backend": backend, "size": size, "set": label,
         "configs": list(configs), "runs": [], "commands": {}}
    for cfg in configs:
        argv, over, _, _ = launch(w, size, backend, cfg, f"{w.name}-{backend}-{label}-{cfg}-R")
        g["commands"][cfg] = shown(argv, over)
    one_run(w, size, backend, "bare", f"{w.name}-{backend}-{label}-warmup")  # page cache, not timed
    for r in range(rounds):
        k = r % len(configs)
        for cfg in list(configs[k:]) + list(configs[:k]):
            tag = f"{w.name}-{backend}-{label}-{cfg}-{r}"
            need_count = exact and cfg == "rec" and "events_exact" not in g
            rec = one_run(w, size, backend, cfg, tag, count=need_count)
            rec["round"] = r
            g["runs"].append(rec)
            if cfg == "rec" and rec["ok"]:
                g.setdefault("backend_version", rec.get("backend_version"))
                g.setdefault("program_calls", rec.get("program_calls"))
            if need_count and rec.get("events") is not None:
                g["events_exact"] = rec["events"]
                g["events_estimate_same_run"] = rec["events_estimate"]
                g["count_method"] = rec["count_method"]
    est = [r["events_estimate"] for r in g["runs"] if r["config"] == "rec" and r["ok"]]
    if est:
        g["events_estimate"] = figures.median(est)
    if "rec" not in configs:
        # events of the sizes run here, from one untimed recording run at each size
        for cfg, key in (("rec", "events_estimate"), ("rec_3x", "events_3x")):
            if cfg == "rec" or any(c.endswith("_3x") for c in configs):
                rec = one_run(w, size, backend, cfg, f"{w.name}-{backend}-{label}-count-{cfg}")
                if rec["ok"]:
                    g[key] = rec["events_estimate"]
    g["events"] = g.get("events_exact", g.get("events_estimate"))
    g["figures"] = figures.group_figures(g)
    g["problems"] = sorted({f"{r['config']}: {p}" for r in g["runs"] for p in r.get("problems", [])})
    say(f"{w.name}/{backend}/{label}: done ({len(g['runs'])} runs, events {g.get('events')})")
    return g
