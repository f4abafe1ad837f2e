#!/usr/bin/env python3
"""The replay's verdict (`shimlog replay LOG --rounds 3`) against real runs: for the programs of
the fidelity section (bench/fidelity.py), is a pair of backends whose real runs differ by more
than 10% ranked as the real runs rank it, and is a pair whose real runs are within 10% called
a tie (ranges of the rounds overlap)?

For each program: one capture (SHIM_BACKEND=glibc); ROUNDS rounds of real runs of every
backend (SHIM_TRACE=0, alternating backends; medians of wall time and of heap RSS, the peak
RSS minus that of the program doing next to nothing); one `shimlog replay LOG --rounds
ROUNDS --json`, whose verdict ranks the columns on wall time and peak RSS with ties.

  python3 bench/verdict_fidelity.py [--smoke] [--write]

A section of `make bench` (bench/bench.py's SECTION_SCRIPTS): --write puts it into
bench/results.json and BENCHMARKS.md alone; its data also goes to bench/out/fidelity/verdict.json."""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fidelity import FID, programs, real_run  # noqa: E402
import sections  # noqa: E402
from workloads import BACKENDS, SHIMLOG, build  # noqa: E402

TITLE = "## The replay's verdict against real runs"
ROUNDS = 3

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


def measure_data(smoke=False, rounds=ROUNDS, only=(), say=lambda s: print(s, file=sys.stderr, flush=True)):
    """Every fidelity program: one capture, `rounds` rounds of real runs of every backend,
    one replay with `--rounds`, its verdict judged pair by pair."""
    for n in FIDELITY_C:
        build(os.path.join("fidelity", n), exe=n)
    os.makedirs(FID, exist_ok=True)
    rows = []
    for name, title, argv, base, env in programs(smoke):
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
        for _ in range(rounds):
            for b in BACKENDS:
                m = real_run(argv, env, b)
                walls[b].append(m["wall_s"])
                rss[b].append(m["maxrss_kb"] * 1024)
        base_rss = {b: real_run(base, env, b)["maxrss_kb"] * 1024 for b in BACKENDS}
        p = subprocess.run([SHIMLOG, "replay", logp, "--rounds", str(rounds), "--json"],
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
        say(f"verdict-fidelity {name}: wall: decisive {sum(x['decisive'] for x in w)}, right "
            f"{sum(x['right'] for x in w)}, close {sum(not x['decisive'] for x in w)}, tied "
            f"{sum(x['tie'] and not x['decisive'] for x in w)}")
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
    res = {"rounds": rounds, "smoke": smoke, "programs": rows, "summary": summ}
    with open(os.path.join(FID, "verdict.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


def section(r):
    """The section's text from measure_data's result."""
    rows, summ = r["programs"], r["summary"]
    pairs = sum(len(x["wall"]) for x in rows)
    lines = sections.intro(TITLE, "python3 bench/verdict_fidelity.py --write", r["rounds"],
                           "medians of the real runs; the replay's own rounds inside it")
    lines += ["", f"The {len(rows)} programs of the replay fidelity section: each captured once on glibc, run for "
              f"real {r['rounds']} rounds on every backend (SHIM_TRACE=0, backends in turns; medians of wall time "
              "and of heap RSS, the peak RSS less that of the program doing next to nothing), and replayed once "
              f"with `shimlog replay LOG --rounds {r['rounds']} --json`, whose verdict ranks the columns by the "
              "median of each figure and calls two columns a tie when the ranges of their rounds overlap. "
              f"{pairs} backend pairs on wall time, {pairs} on peak RSS. A pair is decisive when its real runs "
              "are more than 10% apart, close otherwise.", ""]
    names = {"wall": "wall time", "peak_rss": "peak RSS"}
    lines += sections.table(
        ["figure", "decisive pairs ranked right", "of those, called ties",
         "decisive pairs not called ties, ranked right", "close pairs called ties"],
        [[names[k], f"{s['ranked_right']} of {s['decisive']}", str(s["decisive_called_tie"]),
          f"{s['not_tied_right']} of {s['decisive_not_tied']}", f"{s['close_called_tie']} of {s['close']}"]
         for k, s in summ.items()])
    lines += ["", "Per program (wall time): decisive pairs, ranked right, not called ties and right; close "
              "pairs, called ties.", ""]
    lines += sections.table(["program", "decisive", "right", "not tied, right", "close", "close, tied"], [
        [x["name"], str(sum(p["decisive"] for p in x["wall"])),
         str(sum(p["right"] for p in x["wall"])),
         f"{sum(p['right'] and not p['tie'] for p in x['wall'])} of "
         f"{sum(p['decisive'] and not p['tie'] for p in x['wall'])}",
         str(sum(not p["decisive"] for p in x["wall"])),
         str(sum(p["tie"] and not p["decisive"] for p in x["wall"]))] for x in rows])
    w = summ["wall"]
    worst = min(rows, key=lambda x: sum(p["right"] for p in x["wall"]) - sum(p["decisive"] for p in x["wall"]))
    miss = sum(p["decisive"] and not p["right"] for p in worst["wall"])
    lines += ["", f"Where the verdict calls a wall-time difference (ranges apart) it is right {w['not_tied_right']} "
              f"times in {w['decisive_not_tied']}. Of the pairs whose real runs are within 10% it calls "
              f"{w['close_called_tie']} of {w['close']} ties: the replay times the allocator's calls alone, without "
              "the program's own work, so a difference that is a few percent of a real run can be most of a "
              "replay's, and its rounds tell it apart."
              + (f" The most missed program: {worst['name']} ({miss} decisive pair{'s' if miss != 1 else ''} "
                 "ordered the other way): its real runs differ in a way its allocator calls alone do not show "
                 "(the replay sees only the calls, not how the program's own work fares on each allocator's "
                 "memory)." if miss else ""),
              "", "Data: bench/out/fidelity/verdict.json."]
    return sections.text(lines)


def measure(smoke=False, reps=None, say=lambda s: print(s, file=sys.stderr, flush=True)):
    """The section's text (`reps`: the rounds, 3 unless given; the smoke run uses 2)."""
    return section(measure_data(smoke, reps or (2 if smoke else ROUNDS), say=say))


if __name__ == "__main__":
    sections.main(measure, TITLE)
