#!/usr/bin/env python3
"""The replay's verdict (`shimlog replay LOG --rounds 3`) against real runs: for the programs of
the fidelity section (bench/fidelity.py), is a pair of backends whose real runs differ by more
than 10% ranked as the real runs rank it, and is a pair whose real runs are within 10% called
a tie (ranges of the rounds overlap)?

For each program: one capture (SHIM_BACKEND=glibc); ROUNDS rounds of real runs of every
backend (SHIM_TRACE=0, alternating backends; medians of wall time and of heap RSS, the peak
RSS minus that of the program doing next to nothing); one `shimlog replay LOG --rounds
ROUNDS --json`, whose verdict ranks the columns on wall time and peak RSS with ties.

  python3 bench/verdict_fidelity.py [--smoke] [--rounds N] [--only NAME,...]

Writes bench/out/fidelity/verdict.json and prints the summary."""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fidelity import FID, programs, real_run  # noqa: E402
from workloads import BACKENDS, SHIMLOG, build  # noqa: E402

FIDELITY_C = ("cfrac_like", "glibc_simple_like", "mstress_like", "malloc_large_like",
              "espresso_like", "larson_like", "alloc_test_like")


def judge(real, ranking, close=0.10):
    """Every pair of backends: decisive when the real medians differ by more than `close`
    (then right when the replay's medians order it the same way, and a miss-called tie when
    the replay called it one), else close (then whether the replay called it a tie)."""
    order = ranking["order"]
    ties = {frozenset(p) for p in ranking["ties"]}
    out = []
    for i, a in enumerate(BACKENDS):
        for c in BACKENDS[i + 1:]:
            lo, hi = sorted((real[a], real[c]))
            decisive = hi > lo * (1 + close)
            replay_a_first = order.index(a) < order.index(c)
            out.append({"pair": [a, c], "decisive": decisive,
                        "right": decisive and (real[a] < real[c]) == replay_a_first,
                        "tie": frozenset((a, c)) in ties})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    for n in FIDELITY_C:
        build(os.path.join("fidelity", n), exe=n)
    only = set(filter(None, a.only.split(",")))
    os.makedirs(FID, exist_ok=True)
    rows = []
    for name, title, argv, base, env in programs(a.smoke):
        if only and name not in only:
            continue
        for f in os.listdir(FID):
            if f.startswith(f"v-{name}.") and f.endswith(".shimlog"):
                os.remove(os.path.join(FID, f))
        real_run(argv, env, "glibc", log=os.path.join(FID, f"v-{name}.%p.shimlog"))
        logs = [os.path.join(FID, f) for f in os.listdir(FID) if f.startswith(f"v-{name}.") and f.endswith(".shimlog")]
        logp = max(logs, key=os.path.getsize)
        walls = {b: [] for b in BACKENDS}
        rss = {b: [] for b in BACKENDS}
        for _ in range(a.rounds):
            for b in BACKENDS:
                m = real_run(argv, env, b)
                walls[b].append(m["wall_s"])
                rss[b].append(m["maxrss_kb"] * 1024)
        base_rss = {b: real_run(base, env, b)["maxrss_kb"] * 1024 for b in BACKENDS}
        p = subprocess.run([SHIMLOG, "replay", logp, "--rounds", str(a.rounds), "--json"],
                           capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(f"replay of {logp}: {p.stderr[-400:]}")
        rep = json.loads(p.stdout)
        rk = {r["metric"]: r for r in rep["verdict"]["rankings"]}
        real_w = {b: statistics.median(walls[b]) for b in BACKENDS}
        real_h = {b: max(statistics.median(rss[b]) - base_rss[b], 0) for b in BACKENDS}
        row = {"name": name, "real_wall_s": real_w, "real_heap_rss": real_h,
               "wall": judge(real_w, rk["wall_ns"]), "peak_rss": judge(real_h, rk["peak_rss_bytes"]),
               "verdict": rep["verdict"]["lines"]}
        rows.append(row)
        w = row["wall"]
        print(f"verdict-fidelity {name}: wall: decisive {sum(x['decisive'] for x in w)}, right "
              f"{sum(x['right'] for x in w)}, close {sum(not x['decisive'] for x in w)}, tied "
              f"{sum(x['tie'] and not x['decisive'] for x in w)}", file=sys.stderr, flush=True)
    summ = {}
    for k in ("wall", "peak_rss"):
        ps = [x for r in rows for x in r[k]]
        dec = [x for x in ps if x["decisive"]]
        close = [x for x in ps if not x["decisive"]]
        summ[k] = {"decisive": len(dec), "ranked_right": sum(x["right"] for x in dec),
                   "decisive_called_tie": sum(x["tie"] for x in dec),
                   "decisive_not_tied": sum(not x["tie"] for x in dec),
                   "not_tied_right": sum(x["right"] and not x["tie"] for x in dec),
                   "close": len(close), "close_called_tie": sum(x["tie"] for x in close)}
    res = {"rounds": a.rounds, "smoke": a.smoke, "programs": rows, "summary": summ}
    with open(os.path.join(FID, "verdict.json"), "w") as f:
        json.dump(res, f, indent=1)
    for k, s in summ.items():
        print(f"{k}: decisive pairs (real runs >10% apart) ranked right {s['ranked_right']} of {s['decisive']} "
              f"({s['decisive_called_tie']} of them called ties; of those not called ties "
              f"{s['not_tied_right']} of {s['decisive_not_tied']} right); pairs within 10% called ties "
              f"{s['close_called_tie']} of {s['close']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
