"""Instructions per event, from callgrind: a cost figure the machine's load cannot blur.

A workload runs under callgrind (--separate-threads=yes) at two sizes in each
configuration; the difference between the sizes, divided by the difference in events,
is the marginal cost of one event with start-up and exit cancelled out, split into the
program's threads (the hot path; "calling_thread") and the shim's recorder thread
(compression and writing; "other_threads", told apart by its entry function). The
larger recording run is also broken down by source file and function (callgrind_annotate
self cost; code inlined from another file is listed under that file), which says where
the hot path's instructions go."""
import glob
import os
import re
import shutil
import subprocess

LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.+?)(?:\s+\[(.+)\])?\s*$")


def available():
    return shutil.which("valgrind") is not None and shutil.which("callgrind_annotate") is not None


def _totals(stem):
    """({thread number: instructions}, {thread numbers that are the shim's recorder}) from the
    per-thread callgrind files of one run."""
    out, recorder = {}, set()
    for path in glob.glob(stem + "-*"):
        m = re.search(r"-(\d+)$", path)
        if not m:
            continue
        n = int(m.group(1))
        with open(path) as f:
            for line in f:
                if line.startswith("totals:") or line.startswith("summary:"):
                    out[n] = int(line.split()[1])
                elif "recorder_thread::entry" in line:
                    recorder.add(n)
    return out, recorder


def _self_costs(path):
    """{label: instructions} of callgrind_annotate's self-cost listing for one thread."""
    p = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", path],
                       capture_output=True, text=True)
    costs = {}
    started = False
    for line in p.stdout.splitlines():
        if "file:function" in line:
            started = True
            continue
        if not started:
            continue
        m = LINE.match(line)
        if not m:
            if costs and line.startswith("---"):
                break
            continue
        label = _short(m.group(2))
        costs[label] = costs.get(label, 0) + int(m.group(1).replace(",", ""))
    return costs


def _short(label):
    """'/long/path/recorder/src/varint.rs:malloc' -> 'recorder/src/varint.rs:malloc'."""
    path, _, func = label.rpartition(":")
    if not path:
        return label
    if "/library/" in path:
        path = "std:" + path.split("/library/", 1)[1]
    elif "/.cargo/registry/" in path:
        path = path.split("/src/", 2)[-1] if path.count("/src/") >= 2 else os.path.basename(path)
        path = "crate:" + path
    else:
        parts = path.split("/")
        path = "/".join(parts[-3:]) if len(parts) > 3 else path
    return f"{path}:{func}"


def measure(run_one, sizes, configs, workdir):
    """run_one(config, size, stem) runs the workload under callgrind writing stem-NN files
    and returns its malloc-family call count. Returns per-config marginal instructions per
    event for the program's threads and the recorder thread, and the breakdown of the larger
    recording run's first thread."""
    res = {"sizes": list(sizes), "configs": {}}
    small, big = sizes
    per_label = {}
    for cfg in configs:
        got = {}
        for size in (small, big):
            stem = os.path.join(workdir, f"{cfg}-{size}")
            for old in glob.glob(stem + "*"):
                os.remove(old)
            calls = run_one(cfg, size, stem)
            got[size] = (calls, _totals(stem), stem)
        (c0, (t0, r0), s0), (c1, (t1, r1), s1) = got[small], got[big]
        d_events = c1 - c0
        prog = lambda t, r: sum(v for k, v in t.items() if k not in r)
        rec = lambda t, r: sum(v for k, v in t.items() if k in r)
        main = (prog(t1, r1) - prog(t0, r0)) / d_events
        other = (rec(t1, r1) - rec(t0, r0)) / d_events
        res["configs"][cfg] = {"calling_thread": main, "other_threads": other,
                               "events": [c0, c1],
                               "total_instructions": [sum(t0.values()), sum(t1.values())]}
        if cfg in ("bare", "off", "rec"):
            a, b = _self_costs(s0 + "-01"), _self_costs(s1 + "-01")
            per_label[cfg] = {k: (b.get(k, 0) - a.get(k, 0)) / d_events for k in set(a) | set(b)}
    for cfg in ("off", "rec"):
        if cfg in per_label:
            rows = sorted(per_label[cfg].items(), key=lambda kv: -kv[1])
            res[f"{cfg}_breakdown"] = [{"where": k, "per_event": round(v, 1),
                                        "bare_per_event": round(per_label.get("bare", {}).get(k, 0.0), 1)}
                                       for k, v in rows if v >= 0.5][:20]
    return res
