"""Reading what a recording run left behind: its shim logs, through shimlog (the recorder's
own reader, never a second one here).

`frames()` asks `shimlog dump --format frames` what a log's frame index says, without
decompressing anything: its header, the record count and the raw (uncompressed) and
compressed byte counts, in an instant. `count_events()` asks shimlog for the exact number of
malloc-family events (and dropped events): `shimlog stats --json` when it answers with JSON,
else `shimlog dump --format jsonl` counted line by line."""
import json
import subprocess

from workloads import SHIMLOG

ALLOC_OPS = ("malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
             "aligned_alloc", "memalign", "valloc", "pvalloc")


def frames(path):
    """{'header', 'version', 'frames', 'records', 'raw_bytes', 'comp_bytes', 'file_bytes', 'clean',
    'columnar_frames', 'threads', 'thread_records'}; ValueError naming the log when shimlog
    cannot read it."""
    p = subprocess.run([SHIMLOG, "dump", "--format", "frames", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise ValueError(f"{path}: {p.stderr.strip() or 'shimlog dump failed'}")
    return json.loads(p.stdout)


def estimate_events(infos):
    """Malloc-family events of a run from its logs' frame headers alone: the records of the
    thread streams, less each thread's start record and, for all but one thread per log, its
    exit record. Off by at most a few (a thread's dropped-count records, a main thread that
    did record its exit), and over by the call-site records of slow calls (SHIM_STACKS=slow, the
    default: a few dozen records per slow call); bench.py checks it against the exact count
    where it counts both."""
    return sum(i["thread_records"] - 2 * i["threads"] + 1 for i in infos if i["threads"])


def _from_stats(shimlog, path):
    """(events, dropped) from `shimlog stats --json`, or None if it gives no usable JSON."""
    try:
        p = subprocess.run([shimlog, "stats", "--json", path], capture_output=True,
                           timeout=120)
        obj = json.loads(p.stdout)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        return None
    if p.returncode != 0 or not isinstance(obj, dict):
        return None
    sec = obj.get("total") if isinstance(obj.get("total"), dict) else obj
    ops = sec.get("ops")
    if isinstance(ops, dict) and ops and all(isinstance(v, int) for v in ops.values()):
        events = sum(v for k, v in ops.items() if k in ALLOC_OPS)
    elif isinstance(sec.get("events"), int):
        events = sec["events"]
    else:
        return None
    dropped = sec.get("dropped", sec.get("dropped_events", 0))
    if isinstance(dropped, dict):
        dropped = dropped.get("events", dropped.get("count", 0))
    return events, dropped if isinstance(dropped, int) else 0


def _from_dump(shimlog, path):
    """(events, dropped, [(ts_ns, dropped) per dropped record]) by counting
    `shimlog dump --format jsonl` lines."""
    pats = [b'{"op":"' + op.encode() + b'",' for op in ALLOC_OPS]
    p = subprocess.Popen([shimlog, "dump", path, "--format", "jsonl"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    events = dropped = 0
    drops = []
    rest = b""
    fast = None
    while True:
        chunk = p.stdout.read(1 << 20)
        if not chunk:
            break
        chunk = rest + chunk
        cut = chunk.rfind(b"\n") + 1
        chunk, rest = chunk[:cut], chunk[cut:]
        if fast is None:
            fast = chunk.startswith(b'{"op":"')
        if fast:
            events += sum(chunk.count(b"\n" + pat) for pat in pats)
            events += sum(1 for pat in pats if chunk.startswith(pat))
            if b'"op":"dropped"' in chunk:
                for line in chunk.split(b"\n"):
                    if b'"op":"dropped"' in line:
                        ev = json.loads(line)
                        dropped += int(ev.get("value", 0))
                        drops.append((ev.get("ts_ns"), int(ev.get("value", 0))))
        else:
            for line in chunk.split(b"\n"):
                if line.strip():
                    ev = json.loads(line)
                    if ev.get("op") in ALLOC_OPS:
                        events += 1
                    elif ev.get("op") == "dropped":
                        dropped += int(ev.get("value", 0))
                        drops.append((ev.get("ts_ns"), int(ev.get("value", 0))))
    err = p.stderr.read().decode("utf-8", "replace").strip()
    if p.wait() != 0:
        raise RuntimeError(f"shimlog dump {path} failed: {err.splitlines()[-1] if err else p.returncode}")
    return events, dropped, drops


def count_events(shimlog, paths, need_drops=False):
    """(malloc-family events, dropped events, method[, drops]) summed over the logs of one
    run; with need_drops, always by dump, also giving each dropped record's (ts_ns, count)."""
    events = dropped = 0
    methods = set()
    all_drops = []
    for path in paths:
        got = None if need_drops else _from_stats(shimlog, path)
        if got is not None:
            methods.add("shimlog stats --json")
        else:
            got = _from_dump(shimlog, path)
            methods.add("shimlog dump --format jsonl")
            all_drops += got[2]
        events += got[0]
        dropped += got[1]
    if need_drops:
        return events, dropped, " + ".join(sorted(methods)), all_drops
    return events, dropped, " + ".join(sorted(methods))
