"""Running one measured command: wall time, CPU time and peak RSS of the program.

Every command runs as `/usr/bin/time -f %M -o FILE /usr/bin/env [LD_PRELOAD=...] PROGRAM...`:
GNU time reports the program's max RSS, and env sets LD_PRELOAD for the program only (not
for time). The wrapper is needed because Linux carries a process's peak RSS across exec:
a program forked straight from this Python process would report at least Python's own RSS.
Wall time is taken around the whole thing, so every configuration pays the same wrapper
and process overhead; CPU time comes from wait4's rusage (which covers the descendants it
waited for: the program, heaptrack's helper processes). With `threads=True` the program's
threads are sampled from /proc every few ms for each thread's CPU time (schedstat, in ns),
for the recorder-thread measurement."""
import os
import subprocess
import tempfile
import threading
import time

TIME = "/usr/bin/time"
ENV = "/usr/bin/env"


def have_time():
    return os.access(TIME, os.X_OK) and os.access(ENV, os.X_OK)


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def _thread_cpu_ns(pid):
    """{tid: ns on CPU} for the live threads of pid (empty once it is gone)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                out[int(t)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def run(argv, env, stdout_path, preload="", threads=False, timeout_s=120.0, poll_s=0.003):
    """Runs argv (LD_PRELOAD=preload for it alone) to completion; returns its measurements.

    stdout and stderr go to stdout_path (read back as `output`). A run still going after
    timeout_s is killed (rc -9)."""
    rss_file = tempfile.NamedTemporaryFile(prefix="bench-rss-", delete=False)
    rss_file.close()
    wrapped = list(argv)
    if have_time():
        wrapped = [TIME, "-f", "%M", "-o", rss_file.name, ENV] + \
                  ([f"LD_PRELOAD={preload}"] if preload else []) + wrapped
    elif preload:
        env = dict(env, LD_PRELOAD=preload)
    seen = {}
    program = None
    with open(stdout_path, "wb") as out:
        t0 = time.perf_counter_ns()
        p = subprocess.Popen(wrapped, env=env, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        killer = threading.Timer(timeout_s, p.kill)
        killer.start()
        try:
            if threads:
                while True:
                    pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                    if pid != 0:
                        break
                    if program is None:
                        kids = _children(p.pid) if have_time() else [p.pid]
                        program = kids[0] if kids else None
                    if program is not None:
                        seen.update(_thread_cpu_ns(program))
                    time.sleep(poll_s)
            else:
                _, status, ru = os.wait4(p.pid, 0)
            t1 = time.perf_counter_ns()
        finally:
            killer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    with open(stdout_path, "rb") as f:
        output = f.read().decode("utf-8", "replace")
    maxrss = ru.ru_maxrss
    if have_time():
        with open(rss_file.name) as f:
            lines = f.read().split()
        # time prints "Command exited with non-zero status N" before %M when it fails
        maxrss = int(lines[-1]) if lines and lines[-1].isdigit() else None
    os.unlink(rss_file.name)
    r = {
        "wall_s": (t1 - t0) / 1e9,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "maxrss_kb": maxrss,
        "rc": p.returncode,
        "output": output,
    }
    if threads:
        r["pid"] = program
        r["thread_cpu_ns"] = {str(k): v for k, v in sorted(seen.items())}
    return r
