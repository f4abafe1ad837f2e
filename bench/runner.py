"""Running one measured command: wall time, CPU time and peak RSS of the child.

Wall time is taken around fork/exec/wait, so every configuration pays the same process
overhead; CPU time and max RSS come from the child's rusage (wait4), which also covers
the grandchildren it waited for (heaptrack's helper processes). With `threads=True` the
child's threads are sampled from /proc every few ms to learn each thread's CPU time
(schedstat, in ns), for the recorder-thread measurement."""
import os
import subprocess
import threading
import time


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


def run(argv, env, stdout_path, threads=False, timeout_s=120.0, poll_s=0.003):
    """Runs argv to completion; returns a dict of measurements.

    stdout and stderr go to stdout_path (read back as `output`). A child still running
    after timeout_s is killed (rc -9)."""
    seen = {}
    with open(stdout_path, "wb") as out:
        t0 = time.perf_counter_ns()
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        killer = threading.Timer(timeout_s, p.kill)
        killer.start()
        try:
            if threads:
                while True:
                    pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                    if pid != 0:
                        break
                    seen.update(_thread_cpu_ns(p.pid))
                    time.sleep(poll_s)
            else:
                _, status, ru = os.wait4(p.pid, 0)
            t1 = time.perf_counter_ns()
        finally:
            killer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    with open(stdout_path, "rb") as f:
        output = f.read().decode("utf-8", "replace")
    r = {
        "wall_s": (t1 - t0) / 1e9,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "maxrss_kb": ru.ru_maxrss,
        "rc": p.returncode,
        "output": output,
    }
    if threads:
        r["pid"] = p.pid
        r["thread_cpu_ns"] = {str(k): v for k, v in sorted(seen.items())}
    return r
