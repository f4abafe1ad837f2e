#!/usr/bin/env python3
"""Replay fidelity: does `shimlog replay` of one capture predict how the program itself runs
on each allocator?

For each program: run it for real under the shim with SHIM_TRACE=0 and SHIM_BACKEND=X for
every backend (ROUNDS rounds, alternating backends; medians), capture it once (SHIM_BACKEND=glibc,
recording on), replay that capture with `shimlog replay LOG --json` (default options), and
compare per backend: wall time, peak RSS against the real run's heap RSS (its peak RSS
minus that of the same program doing next to nothing: its `base` command line), and the
order of every pair of backends whose real runs differ by more than 10%.

  python3 bench/fidelity.py [--smoke] [--rounds N] [--only NAME,...] [--shimlog PATH] [--touch-modes] [--report]

bench.py runs it as part of `make bench` (and, small, of --smoke); alone it prints the
markdown section and writes bench/out/fidelity.json."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner  # noqa: E402
from workloads import BACKENDS, BIN, OUT, ROOT, SHIM, SHIMLOG, cc1_argv, clean_env, python3  # noqa: E402

FID = os.path.join(OUT, "fidelity")
SQL = ("create table t(a integer primary key, b text, c real); "
       "with recursive n(i) as (select 1 union all select i+1 from n where i < {n}) "
       "insert into t select i, hex(randomblob(16)), i*0.5 from n; "
       "create index tb on t(b); select count(*), sum(length(b)) from t where c > 100; "
       "select substr(b,1,2) k, count(*) from t group by k order by 2 desc limit 3;")


def programs(smoke):
    """(name, title, argv, base argv, env): the programs, at the bench's size or the smoke's."""
    b = lambda n: os.path.join(BIN, n)
    s = lambda full, small: small if smoke else full
    ps = [
        ("cfrac_like", "1 thread, bignum churn: 20-100 B blocks, a few dozen live",
         [b("cfrac_like"), s("6000000", "100000")], [b("cfrac_like"), "0"], {}),
        ("glibc_simple_like", "4 threads, batches of one size 16 B-4 KiB allocated then freed",
         [b("glibc_simple_like"), s("4000", "50")], [b("glibc_simple_like"), "0"], {}),
        ("mstress_like", "200 short-lived threads, 3 alive at a time, blocks swapped between them",
         [b("mstress_like"), s("200", "12"), s("1500", "200")], [b("mstress_like"), "0"], {}),
        ("malloc_large_like", "1 worker, 20 buffers of 5-25 MiB replaced at random, every byte written",
         [b("malloc_large_like"), s("200", "6")], [b("malloc_large_like"), "0"], {}),
        ("espresso_like", "1 thread, small bit-set blocks, covers grown by realloc",
         [b("espresso_like"), s("400", "4")], [b("espresso_like"), "0"], {}),
        ("larson_like", "4 workers replacing random blocks, handing tables to fresh threads",
         [b("larson_like"), s("40", "2"), s("60000", "2000")], [b("larson_like"), "1", "0"], {}),
        ("alloc_test_like", "1 thread, 20,000 blocks replaced at random, sizes 8 B-64 KiB, reallocs",
         [b("alloc_test_like"), s("4000000", "50000")], [b("alloc_test_like"), "0"], {}),
    ]
    py = python3()
    script = os.path.join(ROOT, "bench", "workloads", "alloc_heavy.py")
    if py:
        env = {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"}
        ps.append(("python3", "python3 bench/workloads/alloc_heavy.py, PYTHONMALLOC=malloc",
                   [py, script, s("1500", "10")], [py, script, "0"], env))
    if shutil.which("gcc") and py:
        os.makedirs(FID, exist_ok=True)
        src, empty = os.path.join(FID, "gen.c"), os.path.join(FID, "empty.c")
        subprocess.run([py, os.path.join(ROOT, "bench", "workloads", "fidelity", "gen_c.py"),
                        s("120", "4"), src], check=True)
        open(empty, "w").close()
        ps.append(("gcc", "gcc's cc1 -O2 on a generated C file of 120 functions",
                   cc1_argv(src, os.path.join(FID, "gen.s")),
                   cc1_argv(empty, os.path.join(FID, "empty.s")), {}))
    if shutil.which("sqlite3"):
        ps.append(("sqlite3", "sqlite3 in memory: 300,000 rows inserted, indexed, grouped",
                   ["sqlite3", ":memory:", SQL.format(n=s(300000, 2000))],
                   ["sqlite3", ":memory:", "select 1;"], {}))
    return ps


def real_run(argv, env_over, backend, log=None):
    env = clean_env()
    env.update(env_over)
    env["SHIM_BACKEND"] = backend
    if log:
        env["SHIM_LOG"] = log
    else:
        env["SHIM_TRACE"] = "0"
    m = runner.run(argv, env, os.path.join(FID, "last-output.txt"), preload=SHIM, timeout_s=300)
    if m["rc"] != 0:
        raise RuntimeError(f"{' '.join(argv)} with {backend} exited with {m['rc']}: {m['output'][-300:]}")
    return m


def replay(shimlog, log, extra=()):
    t0 = time.perf_counter()
    p = subprocess.run([shimlog, "replay", log, "--json", *extra], capture_output=True, text=True, timeout=900)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"shimlog replay {log} failed: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout), dt


def median_col(reps, b):
    """Backend b's column of the replay whose wall time for b is the median of `reps`."""
    cols = sorted((next(c for c in r_["backends"] if c["backend"] == b) for r_ in reps),
                  key=lambda c: c["wall_ns"])
    return cols[len(cols) // 2]


def cpu_s(col):
    return (col["cpu_user_ns"] + col["cpu_sys_ns"]) / 1e9


def rank(d):
    return sorted(d, key=lambda k: d[k])


# The --touch modes replayed besides the default, to show which predicts the real runs best.
OTHER_TOUCH = ("none", "all")


def pairs_of(real, pred):
    """Every pair of backends whose real walls differ by >10%, with whether pred orders it so."""
    out = []
    names = list(real)
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            a, c = names[i], names[j]
            lo, hi = sorted((real[a], real[c]))
            if hi > lo * 1.1:
                out.append({"pair": [a, c], "real_ratio": real[c] / real[a],
                            "replay_ratio": pred[c] / pred[a] if pred[a] > 0 else None,
                            "agree": (real[a] < real[c]) == (pred[a] < pred[c])})
    return out


def measure(smoke=False, rounds=3, only=None, shimlog=SHIMLOG, say=print, touch_modes=False):
    os.makedirs(FID, exist_ok=True)
    for f in os.listdir(FID):
        if f.endswith(".shimlog"):
            os.remove(os.path.join(FID, f))
    out = []
    for name, title, argv, base, env in programs(smoke):
        if only and name not in only:
            continue
        t0 = time.monotonic()
        log = os.path.join(FID, f"{name}.%p.shimlog")
        cap = real_run(argv, env, "glibc", log=log)
        logs = sorted(f for f in os.listdir(FID) if f.startswith(name + ".") and f.endswith(".shimlog"))
        # one process per program here; the largest log is the program's (not a helper's)
        logp = max((os.path.join(FID, f) for f in logs), key=os.path.getsize)
        # Real runs and replays alternate round by round, so that both meet the same load of
        # this shared machine; each figure is a median over the rounds.
        walls = {b: [] for b in BACKENDS}
        cpus = {b: [] for b in BACKENDS}
        rss = {b: [] for b in BACKENDS}
        reps, rep_s = [], []
        modes = {m: [] for m in (OTHER_TOUCH if touch_modes else ())}
        for _ in range(rounds):
            for b in BACKENDS:
                m = real_run(argv, env, b)
                walls[b].append(m["wall_s"])
                cpus[b].append(m["cpu_s"])
                rss[b].append(m["maxrss_kb"] * 1024)
            r_, dt = replay(shimlog, logp)
            reps.append(r_)
            rep_s.append(dt)
            for mode in modes:
                modes[mode].append(replay(shimlog, logp, [f"--touch={mode}"])[0])
        base_rss = {b: real_run(base, env, b)["maxrss_kb"] * 1024 for b in BACKENDS}
        # The replay whose walls are the medians' (per backend, the median run's column).
        rep = reps[0]
        replay_cmd_s = statistics.median(rep_s)
        med_col = {}
        for b in BACKENDS:
            med_col[b] = median_col(reps, b)
        row = {"name": name, "title": title, "argv": argv, "capture_wall_s": cap["wall_s"],
               "log_bytes": os.path.getsize(logp), "replay_command_s": replay_cmd_s,
               "events": rep["plan"]["events"], "threads": rep["plan"]["threads"],
               "peak_threads": rep["plan"]["peak_threads"], "ops_planned": rep["plan"]["ops_total"],
               "ops_replayed": min(c["ops_total"] for c in rep["backends"]), "backends": {}}
        for b in BACKENDS:
            col = med_col[b]
            real_w = statistics.median(walls[b])
            real_rss = statistics.median(rss[b])
            heap = max(real_rss - base_rss[b], 0)
            pred_rss = col["memory"]["peak_rss_bytes"]
            row["backends"][b] = {
                "real_wall_s": real_w, "real_walls_s": walls[b], "real_peak_rss": real_rss,
                "real_cpu_s": statistics.median(cpus[b]),
                "base_rss": base_rss[b], "real_heap_rss": heap,
                "replay_wall_s": col["wall_ns"] / 1e9, "replay_peak_rss": pred_rss,
                "replay_walls_s": [next(c for c in r_["backends"] if c["backend"] == b)["wall_ns"] / 1e9
                                   for r_ in reps],
                "replay_cpu_s": statistics.median(cpu_s(next(c for c in r_["backends"] if c["backend"] == b))
                                                  for r_ in reps),
                "replay_alloc_s": col["alloc_ns_total"] / 1e9, "replay_ops": col["ops_total"],
                "replay_threads_running": col["max_threads_running"],
                "rss_error": (pred_rss - heap) / heap if heap > 0 else None,
            }
        bs = row["backends"]
        real = {b: v["real_wall_s"] for b, v in bs.items()}
        pred = {b: v["replay_wall_s"] for b, v in bs.items()}
        row["real_rank"], row["replay_rank"] = rank(real), rank(pred)
        pairs = pairs_of(real, pred)
        row["pairs"] = pairs
        row["pairs_cpu"] = pairs_of({b: v["real_cpu_s"] for b, v in bs.items()},
                                    {b: v["replay_cpu_s"] for b, v in bs.items()})
        row["touch_modes"] = {}
        for mode, mreps in modes.items():
            cols = {b: median_col(mreps, b) for b in bs}
            pm = {b: cols[b]["wall_ns"] / 1e9 for b in bs}
            row["touch_modes"][mode] = {
                "replay_wall_s": pm,
                "replay_peak_rss": {b: cols[b]["memory"]["peak_rss_bytes"] for b in bs},
                "pairs": pairs_of(real, pm)}
        row["seconds"] = time.monotonic() - t0
        say(f"fidelity {name}: real {fmt_d(real)}, replay {fmt_d(pred)}, "
            f"{sum(p['agree'] for p in pairs)}/{len(pairs)} pairs agree ({row['seconds']:.0f} s)")
        out.append(row)
    return {"rounds": rounds, "smoke": smoke, "programs": out, "summary": summary(out)}


def fmt_d(d):
    return "/".join(f"{v:.3g}" for v in d.values())


# A heap this small is within the noise of peak RSS (shared libraries, stacks): its error in
# percent says nothing, so it is shown but not counted.
MIN_HEAP = 4 << 20


def rss_ok(pred, heap):
    return abs(pred - heap) <= 0.2 * heap


def mode_summary(rows, mode):
    pairs = [p for r in rows for p in r["touch_modes"].get(mode, {}).get("pairs", [])]
    cols = [(r["touch_modes"][mode], b, v) for r in rows if mode in r["touch_modes"]
            for b, v in r["backends"].items()]
    rss = [(m["replay_peak_rss"][b], v["real_heap_rss"]) for m, b, v in cols if v["real_heap_rss"] >= MIN_HEAP]
    return {"pairs": len(pairs), "pairs_agree": sum(p["agree"] for p in pairs),
            "replay_faster": sum(m["replay_wall_s"][b] <= v["real_wall_s"] for m, b, v in cols),
            "columns": len(cols), "rss_within_20": sum(rss_ok(p, h) for p, h in rss), "rss_columns": len(rss)}


def summary(rows):
    pairs = [p for r in rows for p in r["pairs"]]
    cols = [v for r in rows for v in r["backends"].values()]
    rss = [v for v in cols if v["real_heap_rss"] >= MIN_HEAP]
    pcpu = [p for r in rows for p in r.get("pairs_cpu", [])]
    return {
        "pairs": len(pairs), "pairs_agree": sum(p["agree"] for p in pairs),
        "pairs_cpu": len(pcpu), "pairs_cpu_agree": sum(p["agree"] for p in pcpu),
        "columns": len(cols),
        "replay_faster": sum(v["replay_wall_s"] <= v["real_wall_s"] for v in cols),
        "worst_time_ratio": max((v["replay_wall_s"] / v["real_wall_s"] for v in cols), default=None),
        "rss_within_20": sum(rss_ok(v["replay_peak_rss"], v["real_heap_rss"]) for v in rss),
        "rss_columns": len(rss),
        "touch_modes": {m: mode_summary(rows, m) for m in OTHER_TOUCH},
    }


def mib(b):
    return f"{b / 2**20:.1f}"


def markdown(res):
    s = res["summary"]
    L = [
        "## Replay fidelity",
        "",
        "Each program captured once "
        "(`SHIM_BACKEND=glibc`, recording on), then in each of "
        f"{res['rounds']} rounds run for real under the shim with `SHIM_TRACE=0 SHIM_BACKEND=X` for "
        "every backend and replayed from that capture with `shimlog replay LOG --json` (default "
        "options); figures are medians over the rounds. Heap RSS of a real run: its peak RSS "
        "minus that of the same program doing next to nothing (`base` command line in "
        "bench/fidelity.py), same backend. A pair of backends counts when their real runs "
        "differ by more than 10%; it agrees when the replay orders it the same way. "
        "Command: `python3 bench/fidelity.py` (part of `make bench`).",
        "",
        f"- pairs ranked as the real runs rank them: **{s['pairs_agree']} of {s['pairs']}**",
        f"- replay no slower than the real run: **{s['replay_faster']} of {s['columns']}** "
        f"program x backend columns (worst: replay {s['worst_time_ratio']:.2f}x the real run)",
        f"- peak RSS predicted within 20% of the real heap RSS: **{s['rss_within_20']} of {s['rss_columns']}** "
        f"columns whose real heap RSS is at least {MIN_HEAP >> 20} MiB (smaller ones are shown, not counted: "
        "within the noise of peak RSS)",
        "",
        "| program | backend | real wall s | replay wall s | real peak RSS MiB | real heap RSS MiB | replay peak RSS MiB | RSS error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in res["programs"]:
        for b, v in r["backends"].items():
            err = (f"{v['rss_error'] * 100:+.0f}%" if v["real_heap_rss"] >= MIN_HEAP
                   else f"(heap < {MIN_HEAP >> 20} MiB)")
            L.append(f"| {r['name']} | {b} | {v['real_wall_s']:.3f} | {v['replay_wall_s']:.3f} | "
                     f"{mib(v['real_peak_rss'])} | {mib(v['real_heap_rss'])} | {mib(v['replay_peak_rss'])} | {err} |")
    L += ["", "| program | what it does | events | threads | real ranking | replay ranking | pairs >10% agreeing |",
          "|---|---|---|---|---|---|---|"]
    for r in res["programs"]:
        ag = ", ".join(f"{p['pair'][0]}/{p['pair'][1]} {p['real_ratio']:.2f}x vs {p['replay_ratio']:.2f}x "
                       + ("yes" if p["agree"] else "**no**") for p in r["pairs"]) or "none differ by >10%"
        L.append(f"| {r['name']} | {r['title']} | {r['events']:,} | {r['threads']} | "
                 f"{' < '.join(r['real_rank'])} | {' < '.join(r['replay_rank'])} | {ag} |")
    L += ["", f"By CPU time instead of wall time (user + system, medians; steadier on this shared machine "
          f"than wall time): **{s['pairs_cpu_agree']} of {s['pairs_cpu']}** pairs whose real CPU times differ by "
          "more than 10% are ranked the same way by the replay's CPU times.", ""]
    slow = [(r, b, v) for r in res["programs"] for b, v in r["backends"].items()
            if v["replay_wall_s"] > v["real_wall_s"]]
    if slow:
        L += ["Where the replay took longer than the program (the target is at most the real run's "
              "time), per call: the program's whole run, against the replay's (CPU time per op, medians). "
              "These programs do next to nothing between their calls, so there is no work of theirs to "
              "leave out: the replay makes the same calls and, instead of the program's own loop, reads the "
              "next op from the plan, finds its block in the slot table (a cache miss where the program "
              "has its own table) and touches the block, which costs about as much again. The allocator's "
              "part is the same in both.", "",
              "| program | backend | real wall s | replay wall s | real CPU ns per call | replay CPU ns per op |",
              "|---|---|---|---|---|---|"]
        for r, b, v in slow:
            ops = max(v["replay_ops"], 1)
            L.append(f"| {r['name']} | {b} | {v['real_wall_s']:.3f} | {v['replay_wall_s']:.3f} | "
                     f"{v['real_cpu_s'] * 1e9 / ops:.0f} | {v['replay_cpu_s'] * 1e9 / ops:.0f} |")
    tm = s.get("touch_modes", {})
    if any(v["columns"] for v in tm.values()):
        L += ["", "The same captures replayed with each `--touch` mode (medians over the rounds; the default "
              "is `first`):", "",
              "| --touch | pairs agreeing | replay no slower than real | RSS within 20% |", "|---|---|---|---|",
              f"| first (default) | {s['pairs_agree']} of {s['pairs']} | {s['replay_faster']} of {s['columns']} | "
              f"{s['rss_within_20']} of {s['rss_columns']} |"]
        for m, v in tm.items():
            L.append(f"| {m} | {v['pairs_agree']} of {v['pairs']} | {v['replay_faster']} of {v['columns']} | "
                     f"{v['rss_within_20']} of {v['rss_columns']} |")
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--shimlog", default=SHIMLOG)
    ap.add_argument("--touch-modes", action="store_true",
                    help="also replay with --touch=none and all in every round (about twice as long)")
    ap.add_argument("--report", action="store_true",
                    help="print the markdown of the last run (bench/out/fidelity/fidelity.json), run nothing")
    a = ap.parse_args()
    if a.report:
        with open(os.path.join(FID, "fidelity.json")) as f:
            print(markdown(json.load(f)))
        return 0
    rounds = a.rounds or (1 if a.smoke else 3)
    res = measure(a.smoke, rounds, set(filter(None, a.only.split(","))), a.shimlog,
                  say=lambda m: print(m, file=sys.stderr, flush=True), touch_modes=a.touch_modes)
    with open(os.path.join(FID, "fidelity.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
