#!/usr/bin/env python3
"""Each headline figure of a bench run against the previous run's, flagged when it moved by
more than its noise.

A figure's noise is the spread of its rounds: max - min over the rounds (or over the pairs of
a group's runs), the larger of the two runs' spreads. A figure with no rounds (callgrind's
instruction counts, deterministic to ~0.1%) gets 1% of its value. A move larger than the noise
is flagged MOVED (with the direction that is better or worse for that figure); the others are
shown as within the noise.

  drift.py [PREV [CUR]]   PREV and CUR: a results.json file, or git:REV for bench/results.json
                          at REV (default: git:HEAD and bench/results.json)

make bench (bench.py --full) keeps the results.json it replaces as bench/out/results.prev.json
and prints this comparison at its end."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DETERMINISTIC_NOISE = 0.01


def load(spec):
    """A results dict from a file path or git:REV."""
    if spec.startswith("git:"):
        rev = spec[4:]
        p = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:bench/results.json"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise ValueError(f"{spec}: {p.stderr.strip() or 'git show failed'}")
        return json.loads(p.stdout)
    with open(spec) as f:
        return json.load(f)


def _spread(xs):
    xs = [x for x in xs if x is not None]
    return (max(xs) - min(xs)) if len(xs) >= 2 else None


def _pairs(group, config):
    """[(bare run, config run)] by round (figures.pair_up, without importing the bench)."""
    by_round = {}
    for r in group.get("runs", []):
        if r.get("ok"):
            by_round.setdefault(r.get("round"), {})[r["config"]] = r
    return [(v["bare"], v[config]) for _, v in sorted(by_round.items(), key=lambda kv: str(kv[0]))
            if "bare" in v and config in v]


def headlines(results):
    """{key: (label, value, noise or None, unit, higher_is_better)} of one run."""
    out = {}
    for g in results.get("groups", []):
        if g.get("set") != "full":
            continue
        name = f"{g['workload']}/{g['backend']}"
        cfgs = (g.get("figures") or {}).get("configs") or {}
        events = g.get("events")
        for cfg, title in (("off", "SHIM_TRACE=0 wall ratio"), ("rec", "recording wall ratio")):
            f = cfgs.get(cfg)
            if f and f.get("ratio") is not None:
                noise = (f["ratio_max"] - f["ratio_min"]) if f.get("ratio_max") is not None else None
                out[f"{name} {cfg} ratio"] = (f"{name}: {title}", f["ratio"], noise, "x", False)
        f = cfgs.get("rec")
        if f and f.get("ns_per_event") is not None:
            noise = (f["ns_per_event_max"] - f["ns_per_event_min"]) if f.get("ns_per_event_max") is not None else None
            out[f"{name} rec ns"] = (f"{name}: recording adds", f["ns_per_event"], noise, "ns/event", False)
        if f and f.get("bytes_per_event") is not None and events:
            per_run = [c.get("log_bytes") / events for _, c in _pairs(g, "rec") if c.get("log_bytes") is not None]
            out[f"{name} rec bytes"] = (f"{name}: log bytes", f["bytes_per_event"], _spread(per_run), "B/event", False)
    d = results.get("drain") or {}
    if d.get("events_per_s"):
        noise = (d["max"] - d["min"]) if d.get("max") is not None else None
        out["drain"] = ("recorder drain rate", d["events_per_s"] / 1e6,
                        noise / 1e6 if noise is not None else None, "M events/s", True)
    for x in (results.get("stats_speed") or {}).get("logs", []):
        if x.get("events_per_cpu_s"):
            rates = [r / 1e6 for r in x.get("rates") or []]
            out[f"stats {x['name']} one"] = (f"shimlog stats, {x['name']}, --one-thread", x["events_per_cpu_s"] / 1e6,
                                             _spread(rates), "M events/CPU s", True)
        if x.get("two_events_per_wall_s"):
            rates = [r / 1e6 for r in x.get("two_wall_rates") or []]
            out[f"stats {x['name']} two"] = (f"shimlog stats, {x['name']}, default", x["two_events_per_wall_s"] / 1e6,
                                             _spread(rates), "M events/wall s", True)
    for key, title in (("callgrind", "one-thread loop"), ("callgrind_demo", "demo, one thread")):
        cg = (results.get(key) or {}).get("configs") or {}
        for cfg, f in cg.items():
            if f.get("calling_thread") is not None:
                out[f"{key} {cfg} calling"] = (f"callgrind {title}, {cfg}: calling thread", f["calling_thread"], None,
                                               "instr/event", False)
            if f.get("other_threads"):
                out[f"{key} {cfg} other"] = (f"callgrind {title}, {cfg}: recorder thread", f["other_threads"], None,
                                             "instr/event", False)
    return out


def compare(prev, cur):
    """Rows [(label, prev, cur, change %, noise, verdict)] of the figures both runs have, and
    the keys only one of them has."""
    a, b = headlines(prev), headlines(cur)
    rows = []
    for key, (label, now, noise_b, unit, higher_better) in b.items():
        if key not in a:
            continue
        _, was, noise_a, _, _ = a[key]
        noises = [n for n in (noise_a, noise_b) if n is not None]
        deterministic = not noises
        noise = max(noises) if noises else abs(was) * DETERMINISTIC_NOISE
        delta = now - was
        change = (delta / was * 100) if was else float("inf")
        if abs(delta) <= noise:
            verdict = "within noise"
        else:
            better = (delta > 0) == higher_better
            verdict = "MOVED " + ("(better)" if better else "(worse)")
        rows.append({"key": key, "label": label, "unit": unit, "prev": was, "cur": now, "change_pct": change,
                     "noise": noise, "noise_from": "1% (deterministic)" if deterministic else "rounds' range",
                     "verdict": verdict})
    only = sorted(set(a) ^ set(b))
    return rows, only


def render(rows, only, prev_name, cur_name):
    lines = [f"Headline figures: {cur_name} against {prev_name} (noise: the larger of the two runs' "
             f"spreads over their rounds; 1% for instruction counts)"]
    w = max((len(r["label"]) for r in rows), default=10)
    lines.append(f"{'figure':<{w}}  {'previous':>10}  {'now':>10}  {'change':>8}  {'noise':>9}  unit")
    for r in rows:
        lines.append(f"{r['label']:<{w}}  {r['prev']:>10.3f}  {r['cur']:>10.3f}  {r['change_pct']:>+7.1f}%  "
                     f"{r['noise']:>9.3f}  {r['unit']}  {r['verdict']}")
    moved = [r for r in rows if r["verdict"].startswith("MOVED")]
    lines.append(f"{len(moved)} of {len(rows)} figures moved by more than their noise"
                 + (f"; {len(only)} in one run only: {', '.join(only[:6])}{', ...' if len(only) > 6 else ''}"
                    if only else ""))
    return "\n".join(lines)


def name_of(results, spec):
    m = results.get("machine") or {}
    return f"{spec} ({m.get('git_commit', '?')}, {m.get('date', '?')})"


def main(argv):
    if len(argv) > 2 or any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    prev_spec = argv[0] if argv else "git:HEAD"
    cur_spec = argv[1] if len(argv) > 1 else os.path.join(ROOT, "bench", "results.json")
    try:
        prev, cur = load(prev_spec), load(cur_spec)
    except (OSError, ValueError) as e:
        print(f"drift.py: cannot read the results: {e} (give a results.json path or git:REV)", file=sys.stderr)
        return 2
    rows, only = compare(prev, cur)
    print(render(rows, only, name_of(prev, prev_spec), name_of(cur, cur_spec)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
