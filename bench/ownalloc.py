"""Programs that bring their own allocator (the own-allocator issue's numbers).

The workload is workloads/validator (Rust: messages of byte vectors, aligned boxes, maps and
strings grown hop by hop), run on one thread (`0` workers: with its ring of worker threads
the run time is the scheduler's, varying 2-10x from run to run on this shared machine), in
four builds from `make ownalloc`: its own unprefixed jemalloc linked in
(validator-je, like agave-validator), tikv-jemallocator's prefixed one (validator-rjem), the
mimalloc crate (validator-mi), and the C library's malloc (validator-sys, which LD_PRELOAD
reaches as it reaches any C program's).

In each round every configuration runs once, in an order rotated from round to round:
- je bare, je under the shim in its default `own` mode (its entry points patched, every call
  recorded), and sys bare and sys under the shim recording on glibc: recording cost per
  event = (recorded - bare) / events, paired by round, for the patched entry points and for
  LD_PRELOAD's;
- je switched to each backend with SHIM_TRACE=0 against the build linked with that allocator
  (glibc: sys; jemalloc: rjem; mimalloc: mi), bare: a switched program's cost against the
  same program built with the allocator.
Medians over the rounds, with min-max."""
import os
import statistics
import subprocess
import json

import runner
from workloads import OUT, ROOT, SHIM, SHIMLOG, clean_env, shown

BIN = os.path.join(ROOT, "target", "ownalloc", "bin")
LIBJE = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
DIR = os.path.join(OUT, "ownalloc")
ARGS = ["150000", "0"]  # iterations; 0 worker threads: the work on the main thread alone

CONFIGS = {
    # name: (build, env beyond LD_PRELOAD, preload?)
    "je_bare": ("validator-je", {}, False),
    "je_own": ("validator-je", {"SHIM_BACKEND": "own"}, True),
    "sys_bare": ("validator-sys", {}, False),
    "sys_rec": ("validator-sys", {"SHIM_BACKEND": "glibc"}, True),
    "rjem_bare": ("validator-rjem", {}, False),
    "mi_bare": ("validator-mi", {}, False),
    "je_to_glibc": ("validator-je", {"SHIM_BACKEND": "glibc", "SHIM_TRACE": "0"}, True),
    "je_to_jemalloc": ("validator-je", {"SHIM_BACKEND": "jemalloc", "SHIM_TRACE": "0"}, True),
    "je_to_mimalloc": ("validator-je", {"SHIM_BACKEND": "mimalloc", "SHIM_TRACE": "0"}, True),
    # The C-library build on Debian's shared libjemalloc.so.2 (loaded after the shim, as a
    # program linked with -ljemalloc has it), bare and recorded in own mode: the shim's
    # standard names forward to the library's.
    "lib_bare": ("validator-sys", {}, LIBJE),
    "lib_own": ("validator-sys", {}, "SHIM " + LIBJE),
}
# switched configuration -> the build it is compared with
SWITCHED = {"je_to_glibc": "sys_bare", "je_to_jemalloc": "rjem_bare", "je_to_mimalloc": "mi_bare"}


def available():
    return all(os.path.exists(os.path.join(BIN, b)) for b, _, _ in CONFIGS.values()) and os.path.exists(LIBJE)


def _preload(p):
    """A configuration's LD_PRELOAD: True is the shim, a string names files (SHIM: the shim)."""
    if p is True:
        return SHIM
    return p.replace("SHIM", SHIM) if p else ""


def _run(name, tag):
    build, extra, preload = CONFIGS[name]
    env = clean_env()
    env.update(extra)
    env["SHIM_LOG"] = os.path.join(DIR, f"{tag}.%p.shimlog")
    argv = [os.path.join(BIN, build)] + ARGS
    m = runner.run(argv, env, os.path.join(DIR, "last-output.txt"), preload=_preload(preload))
    checksum = next((l for l in m["output"].splitlines() if l.startswith("checksum")), None)
    return {"config": name, "wall_s": m["wall_s"], "cpu_s": m["cpu_s"], "ok": m["rc"] == 0 and checksum is not None,
            "checksum": checksum, "command": shown(argv, {**extra, **({"LD_PRELOAD": _preload(preload)} if preload else {})})}


def _events(tag):
    """Malloc-family events in the log a run left (shimlog stats --json, every op)."""
    logs = [os.path.join(DIR, f) for f in os.listdir(DIR) if f.startswith(tag + ".") and f.endswith(".shimlog")]
    if not logs:
        return None
    p = subprocess.run([SHIMLOG, "stats", "--json"] + logs, capture_output=True, timeout=600)
    if p.returncode != 0:
        return None
    ops = json.loads(p.stdout).get("ops", {})
    return sum(ops.values())


def _stat(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def measure(rounds, say):
    if not available():
        say("ownalloc: target/ownalloc/bin is incomplete (make ownalloc); section skipped")
        return None
    os.makedirs(DIR, exist_ok=True)
    for f in os.listdir(DIR):
        if f.endswith(".shimlog"):
            os.remove(os.path.join(DIR, f))
    names = list(CONFIGS)
    rounds_out = []
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        runs = {}
        for n in order:
            tag = f"r{r}-{n}"
            runs[n] = _run(n, tag)
        for n in ("je_own", "sys_rec", "lib_own"):
            runs[n]["events"] = _events(f"r{r}-{n}")
        for f in os.listdir(DIR):
            if f.endswith(".shimlog"):
                os.remove(os.path.join(DIR, f))
        rounds_out.append(runs)
        say(f"ownalloc round {r + 1}/{rounds}: " + ", ".join(f"{n} {runs[n]['wall_s']:.2f}s" for n in names))
    ok = all(run["ok"] for rd in rounds_out for run in rd.values())
    sums = {rd[n]["checksum"] for rd in rounds_out for n in names}

    def per_event(rec, bare, key="wall_s"):
        out = []
        for rd in rounds_out:
            ev = rd[rec].get("events")
            if ev:
                out.append((rd[rec][key] - rd[bare][key]) * 1e9 / ev)
        return _stat(out)

    def ratio(a, b, key="wall_s"):
        return _stat([rd[a][key] / rd[b][key] for rd in rounds_out if rd[b][key] > 0])

    return {
        "args": ARGS,
        "ok": ok and len(sums) == 1,
        "rounds": rounds_out,
        "events": _stat([rd["je_own"].get("events") for rd in rounds_out]),
        "wall_s": {n: _stat([rd[n]["wall_s"] for rd in rounds_out]) for n in names},
        "own_ns_per_event": per_event("je_own", "je_bare"),
        "preload_ns_per_event": per_event("sys_rec", "sys_bare"),
        "own_cpu_ns_per_event": per_event("je_own", "je_bare", "cpu_s"),
        "preload_cpu_ns_per_event": per_event("sys_rec", "sys_bare", "cpu_s"),
        "lib_own_cpu_ns_per_event": per_event("lib_own", "lib_bare", "cpu_s"),
        "cpu_s": {n: _stat([rd[n]["cpu_s"] for rd in rounds_out]) for n in names},
        "switched_ratio": {k: ratio(k, v) for k, v in SWITCHED.items()},
        "switched_cpu_ratio": {k: ratio(k, v, "cpu_s") for k, v in SWITCHED.items()},
        "commands": {n: rounds_out[0][n]["command"] for n in names},
    }


def _f(s, nd=1, unit=""):
    if not s:
        return "n/a"
    return f"{s['median']:.{nd}f}{unit} ({s['min']:.{nd}f}-{s['max']:.{nd}f})"


def targets(o):
    """The issue's two numbers, as report.targets rows. On CPU time (every thread's, the
    recorder's included): this workload runs on one thread, so its wall time on this shared
    2-core machine is mostly how long it waited for a core."""
    if not o:
        return []
    own, pre = o["own_cpu_ns_per_event"], o["preload_cpu_ns_per_event"]
    rows = []
    if own and pre:
        d = own["median"] - pre["median"]
        rows.append({"target": "own allocator: recording cost per event within 5 ns of LD_PRELOAD's",
                     "figure": f"{own['median']:.1f} ns own vs {pre['median']:.1f} ns LD_PRELOAD ({d:+.1f} ns, CPU)",
                     "met": d <= 5.0,
                     "why": "" if d <= 5.0 else
                     "see the section \"Programs that bring their own allocator\"."})
    lib = o.get("lib_own_cpu_ns_per_event")
    if lib and pre:
        d = lib["median"] - pre["median"]
        rows.append({"target": "own allocator in a shared library (libjemalloc.so.2): recording cost per event within 5 ns of LD_PRELOAD's on glibc",
                     "figure": f"{lib['median']:.1f} ns through libjemalloc.so.2 vs {pre['median']:.1f} ns on glibc ({d:+.1f} ns, CPU)",
                     "met": d <= 5.0,
                     "why": "" if d <= 5.0 else "the library's own calls cost more to record than glibc's (see the section \"Programs that bring their own allocator\")."})
    worst = max((v["median"] for v in o["switched_cpu_ratio"].values() if v), default=None)
    if worst is not None:
        rows.append({"target": "own allocator switched: within 2% of the program built with that allocator",
                     "figure": ", ".join(f"{k.split('_to_')[1]} {v['median']:.3f}x"
                                         for k, v in o["switched_cpu_ratio"].items() if v) + " (CPU)",
                     "met": worst <= 1.02,
                     "why": "" if worst <= 1.02 else
                     "with SHIM_TRACE=0 malloc, calloc, realloc, free and sdallocx call the backend directly "
                     "(patch/native.rs; a few instructions and the old-block lookup a call); what remains is "
                     "the two builds' own code, which differs (the validator-je build zeroes some boxes "
                     "itself, which validator-mi leaves to mi_zalloc; callgrind, in the section \"Programs "
                     "that bring their own allocator\")."})
    return rows


def markdown(o):
    L = ["## Programs that bring their own allocator\n"]
    if not o:
        L.append("Skipped: `make ownalloc` had not built target/ownalloc/bin.\n")
        return L
    L.append(f"workloads/validator `{' '.join(o['args'])}` (iterations, worker threads), "
             f"{_f(o['events'], 0)} malloc-family events a run; {len(o['rounds'])} rounds, every "
             f"configuration once a round in rotated order; medians (min-max). Outputs identical "
             f"across every run: {'yes' if o['ok'] else '**no**'}.\n")
    L.append("| configuration | wall s | CPU s (all threads) |")
    L.append("|---|---|---|")
    for n, s in o["wall_s"].items():
        L.append(f"| `{o['commands'][n]}` | {_f(s, 3)} | {_f(o['cpu_s'][n], 3)} |")
    L.append("")
    L.append(f"- Recording cost per event, paired by round: the program's own unprefixed jemalloc, "
             f"patched (`SHIM_BACKEND` unset): **{_f(o['own_ns_per_event'], 1, ' ns')}**; the same "
             f"program on the C library's malloc, reached by LD_PRELOAD: **{_f(o['preload_ns_per_event'], 1, ' ns')}**. "
             f"In CPU time (the recorder thread's included): {_f(o['own_cpu_ns_per_event'], 1, ' ns')} and "
             f"{_f(o['preload_cpu_ns_per_event'], 1, ' ns')}.")
    if o.get("lib_own_cpu_ns_per_event"):
        L.append(f"- Recorded through a shared allocator library (validator-sys on Debian's libjemalloc.so.2, "
                 f"loaded after the shim; `own` mode): {_f(o['lib_own_cpu_ns_per_event'], 1, ' ns')} CPU per event.")
    for k, v in o["switched_cpu_ratio"].items():
        L.append(f"- validator-je switched to {k.split('_to_')[1]} (`SHIM_TRACE=0`) against the build "
                 f"linked with it ({SWITCHED[k].split('_')[0]}): **{_f(v, 3, 'x')}** the CPU time, "
                 f"{_f(o['switched_ratio'][k], 3, 'x')} the wall time.")
    L.append("")
    return L
