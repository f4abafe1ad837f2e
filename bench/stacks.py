"""Call stacks' cost (issue 20), run by make bench and on its own:

    python3 bench/stacks.py [--smoke] [--write]

1. Unwinding: ns per stack at depth 16 and 64, unwind tables against frame pointers.
   bench/workloads/stack_depth.c (built with frame pointers) recurses that deep and makes
   malloc/free pairs there; SHIM_STACKS=all takes a stack at every malloc. The cost per
   stack is the wall time per pair under SHIM_STACKS=all minus under SHIM_STACKS=off, the
   two run alternately, median of the repetitions.
2. The modes on the bench's real programs (python3 alloc_heavy.py with PYTHONMALLOC=malloc,
   gcc's cc1): wall time under the shim recording with SHIM_STACKS=off (recording as before
   this issue), slow (the default) and sample (512 KiB), run alternately, medians, as
   ratios to off; and the log sizes.

--write replaces the section "Call stacks" of BENCHMARKS.md (or appends it)."""
import os
import statistics
import subprocess
import sys
import json
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sections  # noqa: E402
import workloads as wl  # noqa: E402

ROOT = wl.ROOT
BIN = wl.BIN
TITLE = "## Call stacks"


def build_depth():
    return wl.build("stack_depth", ("-O2", "-g", "-fno-omit-frame-pointer"), "stack_depth_fp")


def timed(argv, env, logdir):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("SHIM_") or k == "LD_PRELOAD":
            del e[k]
    e.update(env)
    e["LD_PRELOAD"] = wl.SHIM
    e["SHIM_LOG"] = os.path.join(logdir, "%e.%p.shimlog")
    t = time.perf_counter()
    p = subprocess.Popen(argv, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    if status != 0:
        raise RuntimeError(f"{argv[0]} exited with status {status}")
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime


def log_bytes(logdir):
    n = 0
    for f in os.listdir(logdir):
        p = os.path.join(logdir, f)
        n += os.path.getsize(p)
        os.unlink(p)
    return n


def unwinding(reps, calls):
    exe = build_depth()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-stacks-") as d:
        for depth in (16, 64):
            for unwind in ("tables", "fp"):
                off, on = [], []
                for _ in range(reps):
                    # Deeper than taken: exactly `depth` frames are unwound.
                    argv = [exe, str(depth + 8), str(calls)]
                    off.append(timed(argv, {"SHIM_STACKS": "off"}, d)[0])
                    log_bytes(d)
                    on.append(timed(argv, {"SHIM_STACKS": "all", "SHIM_UNWIND": unwind, "SHIM_STACK_DEPTH": str(depth)}, d)[0])
                    log_bytes(d)
                per = (statistics.median(on) - statistics.median(off)) / calls * 1e9
                rows.append((depth, unwind, per, statistics.median(off) / calls * 1e9))
    return rows


def modes(reps, smoke):
    py = wl.python3()
    script = os.path.join(ROOT, "bench", "workloads", "alloc_heavy.py")
    progs = [("python3 alloc_heavy.py", [py, script, "30" if smoke else "6000"], {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"})]
    try:
        cc1 = wl.cc1_argv(os.path.join(ROOT, "workloads", "demo.c"), os.path.join(tempfile.gettempdir(), "bench-stacks-demo.s"))
        progs.append(("gcc (cc1) -O2 -g demo.c", cc1, {}))
    except Exception as e:  # noqa: BLE001
        print(f"stacks: no cc1 ({e}); skipped", file=sys.stderr)
    cfgs = [("off", {"SHIM_STACKS": "off"}), ("slow", {}), ("sample", {"SHIM_STACKS": "sample"})]
    out = []
    taken = {}
    with tempfile.TemporaryDirectory(prefix="bench-stacks-") as d:
        for name, argv, env in progs:
            times = {c: [] for c, _ in cfgs}
            cpus = {c: [] for c, _ in cfgs}
            sizes = {c: [] for c, _ in cfgs}
            for _ in range(reps):
                for c, ce in cfgs:
                    w, cpu = timed(argv, {**env, **ce}, d)
                    times[c].append(w)
                    cpus[c].append(cpu)
                    if c == "sample" and name not in taken:
                        taken[name] = stacks_taken(d)
                    sizes[c].append(log_bytes(d))
            med = {c: statistics.median(v) for c, v in times.items()}
            cpu = {c: statistics.median(v) for c, v in cpus.items()}
            cpu["spread"] = (max(cpus["off"]) - min(cpus["off"])) / cpu["off"] if cpu["off"] else 0.0
            out.append((name, med, cpu, {c: statistics.median(v) for c, v in sizes.items()}, taken.get(name)))
    return out


def stacks_taken(logdir):
    """Allocations sampled in the (one) log of logdir, by shimlog stats."""
    n = 0
    for f in os.listdir(logdir):
        p = subprocess.run([wl.SHIMLOG, "stats", "--json", "--top", "1000000", os.path.join(logdir, f)],
                           capture_output=True, text=True)
        if p.returncode == 0:
            sites = json.loads(p.stdout).get("sites") or {}
            n += sum(r["samples"] for r in sites.get("by_bytes", []))
    return n


def section(unw, mds, reps, cmd):
    L = sections.intro(TITLE, cmd, reps, "run alternately, medians")
    L += ["", "Unwinding, per stack taken (SHIM_STACKS=all on bench/workloads/stack_depth.c built with frame pointers; "
          "wall time per malloc/free pair minus the same with SHIM_STACKS=off):", ""]
    L += sections.table(["depth", "unwinder", "ns per stack", "pair without stacks (ns)"],
                        [[f"{depth}", "unwind tables (.eh_frame, libgcc)" if unwind == "tables" else "frame pointers",
                          f"{per:,.0f}", f"{base:,.0f}"] for depth, unwind, per, base in unw])
    L += ["", "The modes on real programs, recording (ratios to SHIM_STACKS=off, which records as before stacks existed; "
          "CPU time is the process's user + system time, recorder thread included, less disturbed by the neighbours than wall time):", ""]
    cells = []
    for name, med, cpu, size, n in mds:
        o, c = med["off"], cpu["off"]
        cells.append([name, f"{o:.3f}", f"{c:.3f}", f"{med['slow'] / o:.3f}x", f"{cpu['slow'] / c:.3f}x",
                      f"{med['sample'] / o:.3f}x", f"{cpu['sample'] / c:.3f}x", f"{size['off'] / 1048576:.2f} MiB",
                      f"{size['slow'] / 1048576:.2f} MiB", f"{size['sample'] / 1048576:.2f} MiB", f"{n}"])
    L += sections.table(["program", "off: wall (s)", "off: CPU (s)", "slow (default): wall", "slow: CPU", "sample 512 KiB: wall",
                         "sample: CPU", "log off", "log slow", "log sample", "stacks taken (sample)"], cells)
    per = {u: p for d_, u, p, _ in unw if d_ == 64}
    L += ["", "What sample mode should cost is the stacks it takes times the cost of one: "
          + "; ".join(f"{name}: {n} stacks x {per.get('tables', 0) / 1000:.1f} us (tables, depth 64) = "
                      f"{n * per.get('tables', 0) / 1e9 / cpu['off'] * 100:.2f}% of its CPU time "
                      f"(its SHIM_STACKS=off runs' CPU times spread over {cpu['spread'] * 100:.0f}%, max - min over the median)"
                      for name, med, cpu, size, n in mds if n is not None)
          + ". The default (slow) adds one compare to each timed call (one in 64) and takes a stack only for a call "
            "over SHIM_STALL."]
    return sections.text(L)


def write(sec):
    sections.write(TITLE, sec)


def measure(smoke, reps=None):
    """The section's text (a smoke run: one repetition, tiny sizes, to check it works)."""
    reps = 1 if smoke else (reps or 9)
    unw = unwinding(reps, 2_000 if smoke else 200_000)
    mds = modes(reps, smoke)
    return section(unw, mds, reps, "python3 bench/stacks.py --write")


if __name__ == "__main__":
    sections.main(measure, TITLE)
