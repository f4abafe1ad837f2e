"""What `shimlog report` and `shimlog export` cost on a large log (issue #21's numbers):
report's time and peak memory against `shimlog stats` on the same log (target: within
1.2x), the page's size (target: under 2 MB); export's rate in M events per second (target:
at least 10) and the Parquet bytes per event against the log's.

The log: the genlog example's synthetic workload, REPORT_EVENTS events (default 100 M; 8
threads interleaved, about 100 000 blocks live, most frees cross-thread). Each round runs
stats, report and export one after the other (the default way: the reader on a second
thread), each timed by wait4 (wall, user + system CPU, peak RSS); medians over the rounds.

Alone: python3 bench/report_export.py [ROUNDS] (needs target/release/shimlog and the genlog
example: cargo build --release -p shimlog --example genlog); prints the BENCHMARKS.md section
and writes bench/out/report_export/result.json."""
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import OUT, ROOT, SHIMLOG  # noqa: E402

GENLOG = os.path.join(ROOT, "target", "release", "examples", "genlog")
DIR = os.path.join(OUT, "report_export")


def _timed(argv):
    """Runs argv (output discarded); its wall and CPU seconds and peak RSS in bytes."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {err.strip()}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_bytes": ru.ru_maxrss * 1024}


def _du(path):
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True))


def measure(rounds, say, events=None):
    events = events or int(os.environ.get("REPORT_EVENTS", 100_000_000))
    if not os.path.exists(GENLOG):
        return {"skipped": "the genlog example is missing (bench/run.sh builds it)"}
    os.makedirs(DIR, exist_ok=True)
    log = os.path.join(DIR, "synthetic.shimlog")
    if os.path.exists(log):
        os.remove(log)
    gen = [GENLOG, log, str(events)]
    subprocess.run(gen, check=True, capture_output=True, timeout=1800)
    say(f"report/export: {events} events, {os.path.getsize(log)} bytes of log")
    page = os.path.join(DIR, "report.html")
    out = os.path.join(DIR, "export")
    runs = {"stats": [], "report": [], "export": []}
    for i in range(rounds):
        runs["stats"].append(_timed([SHIMLOG, "stats", log]))
        runs["report"].append(_timed([SHIMLOG, "report", log, "-o", page]))
        shutil.rmtree(out, ignore_errors=True)
        runs["export"].append(_timed([SHIMLOG, "export", log, "-o", out, "--host", "bench"]))
        say(f"report/export round {i + 1}/{rounds}: stats {runs['stats'][-1]['wall_s']:.1f} s, "
            f"report {runs['report'][-1]['wall_s']:.1f} s, export {runs['export'][-1]['wall_s']:.1f} s")
    med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in runs.items()}
    pq = {os.path.basename(f): os.path.getsize(f) for f in glob.glob(os.path.join(out, "*", "*", "*.parquet"))}
    res = {
        "events": events,
        "log_bytes": os.path.getsize(log),
        "rounds": rounds,
        "median": med,
        "runs": runs,
        "html_bytes": os.path.getsize(page),
        "parquet_bytes": pq,
        "parquet_total_bytes": _du(out),
        "commands": [" ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in c) for c in
                     (gen, [SHIMLOG, "stats", log], [SHIMLOG, "report", log, "-o", page],
                      [SHIMLOG, "export", log, "-o", out, "--host", "bench"])],
    }
    res["report_vs_stats"] = {"wall": med["report"]["wall_s"] / med["stats"]["wall_s"],
                              "cpu": med["report"]["cpu_s"] / med["stats"]["cpu_s"],
                              "peak_rss": med["report"]["peak_rss_bytes"] / med["stats"]["peak_rss_bytes"]}
    res["export_m_events_per_s"] = {"wall": events / med["export"]["wall_s"] / 1e6,
                                    "cpu": events / med["export"]["cpu_s"] / 1e6}
    os.remove(log)
    shutil.rmtree(out, ignore_errors=True)
    return res


def markdown(r):
    out = ["## shimlog report and export\n"]
    if not r or r.get("skipped"):
        out.append(f"Skipped: {(r or {}).get('skipped', 'not measured')}\n")
        return out
    m, n = r["median"], r["events"]
    out.append(f"The genlog synthetic log of {n / 1e6:g} M events ({r['log_bytes'] / 2**20:.0f} MiB), "
               f"{r['rounds']} rounds of stats, report and export one after the other; medians. "
               "CPU is user + system of the process (the reader runs on a second thread).\n")
    out.append("| command | wall s | CPU s | peak RSS MiB |")
    out.append("|---|---|---|---|")
    for k in ("stats", "report", "export"):
        out.append(f"| {k} | {m[k]['wall_s']:.2f} | {m[k]['cpu_s']:.2f} | {m[k]['peak_rss_bytes'] / 2**20:.0f} |")
    rv = r["report_vs_stats"]
    out.append("")
    out.append(f"- report against stats: {rv['wall']:.2f}x the wall time, {rv['cpu']:.2f}x the CPU, "
               f"{rv['peak_rss']:.2f}x the peak RSS (target: within 1.2x); the page is "
               f"{r['html_bytes'] / 1024:.0f} KiB (target: under 2 MB).")
    e = r["export_m_events_per_s"]
    per = {k: v / n for k, v in sorted(r["parquet_bytes"].items())}
    out.append(f"- export: {e['wall']:.1f} M events per wall second, {e['cpu']:.1f} M per CPU second "
               "(target: 10 M/s); Parquet "
               f"{r['parquet_total_bytes'] / n:.2f} bytes per event in all against the log's "
               f"{r['log_bytes'] / n:.2f} (" + ", ".join(f"{k} {v:.2f}" for k, v in per.items()) + ").")
    out.append("\nCommands: " + ", ".join(f"`{c}`" for c in r["commands"]) + ".\n")
    return out


if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    res = measure(rounds, lambda s: print(s, file=sys.stderr))
    os.makedirs(DIR, exist_ok=True)
    with open(os.path.join(DIR, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("\n".join(markdown(res)))
