"""Dead processes' in-flight files (issue #37, recorder/src/reclaim.rs, shim/src/reclaim.rs),
run by make bench and on its own:

    python3 bench/inflight.py [--smoke] [--write] [REPS]

1. Start-up: /bin/true's wall time, bare and under the shim with 0 and with 100 dead
   in-flight files in its in-flight directory (made by itest/programs/c/crashloop.c aborting under
   the shim with SHIM_INFLIGHT_MAX=off; those a run recovered are put back before the next,
   so each run finds 100). REPS runs each (default 21), alternated, medians: the recovery
   runs on a thread of its own after start-up and must not show here.
2. A crash loop: itest/programs/c/crashloop.c aborting 200 times in a row (each allocating for about
   35 ms first), each with its own log; the tmpfs bytes its in-flight directory holds after
   it, with the default SHIM_INFLIGHT_MAX and with the reclaiming off (what it cost before).
3. `shimlog recover --all` on 100 dead files: the time per file.

Every run has an in-flight directory of its own on /dev/shm (SHIM_INFLIGHT_DIR), never the
user's. --write replaces the section "Dead processes' in-flight files" of BENCHMARKS.md (or
appends it)."""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sections  # noqa: E402
import workloads as wl  # noqa: E402

ROOT = wl.ROOT
TITLE = "## Dead processes' in-flight files"


def build():
    """itest/programs/c/crashloop.c built into the bench's binaries (again when the source is newer)."""
    src = os.path.join(ROOT, "itest", "programs", "c", "crashloop.c")
    exe = os.path.join(wl.BIN, "crashloop")
    if not os.path.exists(exe) or os.path.getmtime(src) > os.path.getmtime(exe):
        os.makedirs(wl.BIN, exist_ok=True)
        subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
    return exe


def env(base, logdir, max_=None):
    e = wl.clean_env()
    e["LD_PRELOAD"] = wl.SHIM
    e["SHIM_LOG"] = os.path.join(logdir, "%e.%p.shimlog")
    e["SHIM_INFLIGHT_DIR"] = base
    if max_ is not None:
        e["SHIM_INFLIGHT_MAX"] = max_
    return e


def user_dir(base):
    return os.path.join(base, f"shim-{os.getuid()}")


def files(base):
    d = user_dir(base)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".inflight")) if os.path.isdir(d) else []


def tmpfs_bytes(base):
    """What the in-flight files take in memory (allocated blocks, not their sparse length)."""
    return sum(os.stat(f).st_blocks * 512 for f in files(base))


def crash(exe, e, rounds):
    r = subprocess.run([exe, "abort", str(rounds)], env=e, capture_output=True, text=True)
    if r.returncode != -6:
        raise RuntimeError(f"crashloop did not abort ({r.returncode}): {r.stderr.strip()}")


def make_dead(exe, n, base, logdir):
    """n dead processes' files (nobody reclaims them: SHIM_INFLIGHT_MAX=off)."""
    for _ in range(n):
        crash(exe, env(base, logdir, "off"), 3)
    got = files(base)
    if len(got) != n:
        raise RuntimeError(f"{n} crashes left {len(got)} in-flight files")


def timed(cmd, e):
    t = time.perf_counter()
    subprocess.run(cmd, env=e, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def startup(exe, reps, n_dead, work):
    """/bin/true bare, and under the shim with 0 and n_dead dead files: medians in ms, and how
    many files runs recovered (put back each time)."""
    empty, full, logs, stash = (os.path.join(work, d) for d in ("empty", "full", "logs", "stash"))
    for d in (empty, full, logs, stash):
        os.makedirs(d)
    make_dead(exe, n_dead, full, logs)
    # The dead files and their logs as they were, to put back what a run recovered.
    shutil.copytree(user_dir(full), os.path.join(stash, "inflight"), copy_function=sparse_copy)
    shutil.copytree(logs, os.path.join(stash, "logs"))
    times = {"bare": [], "0": [], "n": []}
    recovered = 0
    for _ in range(reps):
        times["bare"].append(timed(["/bin/true"], wl.clean_env()))
        times["0"].append(timed(["/bin/true"], env(empty, logs)))
        times["n"].append(timed(["/bin/true"], env(full, logs)))
        # Let a reclaim that outlived nothing settle, then put back what went.
        have = set(os.path.basename(f) for f in files(full))
        for f in os.listdir(os.path.join(stash, "inflight")):
            if f not in have:
                recovered += 1
                sparse_copy(os.path.join(stash, "inflight", f), os.path.join(user_dir(full), f))
        if recovered:
            shutil.rmtree(logs)
            shutil.copytree(os.path.join(stash, "logs"), logs)
        for f in os.listdir(logs):
            if f.startswith("true."):
                os.remove(os.path.join(logs, f))
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return ms, recovered


def sparse_copy(src, dst):
    subprocess.run(["cp", "--sparse=always", src, dst], check=True)


def loop(exe, n, base, logdir, max_):
    """n crashes in a row; the directory's tmpfs bytes after, the most after any one, seconds."""
    most = 0
    t = time.perf_counter()
    for _ in range(n):
        crash(exe, env(base, logdir, max_), 30)
        most = max(most, tmpfs_bytes(base))
    return tmpfs_bytes(base), most, len(files(base)), time.perf_counter() - t


def recover_all(exe, n, work):
    base, logs = os.path.join(work, "ra"), os.path.join(work, "ra-logs")
    os.makedirs(base)
    os.makedirs(logs)
    make_dead(exe, n, base, logs)
    e = wl.clean_env()
    e["SHIM_INFLIGHT_DIR"] = base
    t = time.perf_counter()
    out = subprocess.run([wl.SHIMLOG, "recover", "--all"], env=e, capture_output=True, text=True, check=True)
    took = time.perf_counter() - t
    if files(base) or f"{n} recovered" not in out.stdout:
        raise RuntimeError(f"recover --all left {len(files(base))} files: {out.stdout.splitlines()[-1:]}")
    return took / n * 1e3


def measure(smoke, reps=None):
    reps = 3 if smoke else (reps or 21)
    n_dead = 10 if smoke else 100
    crashes = 20 if smoke else 200
    exe = build()
    work = tempfile.mkdtemp(prefix="bench-inflight-", dir="/dev/shm")
    try:
        ms, put_back = startup(exe, reps, n_dead, os.path.join(work, "startup"))
        mib = 1 << 20
        loops = {}
        for name, max_ in (("default", None), ("off", "off")):
            base, logs = os.path.join(work, f"loop-{name}"), os.path.join(work, f"loop-{name}-logs")
            os.makedirs(base)
            os.makedirs(logs)
            loops[name] = loop(exe, crashes, base, logs, max_)
            shutil.rmtree(base)
            shutil.rmtree(logs)
        per_file = recover_all(exe, n_dead, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    L = sections.intro(TITLE, "python3 bench/inflight.py --write", reps,
                       "/bin/true's wall time from Python's subprocess.run, bare and under the shim alternated, "
                       "medians")
    L += ["", f"Start-up with dead processes' in-flight files present (the recovery runs on a thread of its own, "
          f"after start-up; /bin/true ends before it gets far: {put_back} files recovered in {reps} runs, put back "
          f"each time):", ""]
    L += sections.table(["/bin/true", "wall ms (median)"], [
        ["bare", f"{ms['bare']:.2f}"],
        ["under the shim, no dead in-flight file", f"{ms['0']:.2f}"],
        [f"under the shim, {n_dead} dead in-flight files", f"{ms['n']:.2f}"],
    ])
    d, o = loops["default"], loops["off"]
    L += ["", f"A crash loop: itest/programs/c/crashloop.c aborting {crashes} times in a row (about 35 ms of allocating "
          f"each), every one with its own log:", ""]
    L += sections.table(["SHIM_INFLIGHT_MAX", "in-flight files after", "tmpfs MiB after", "most MiB after any run",
                         "loop seconds"], [
        ["64M (the default)", str(d[2]), f"{d[0] / mib:.1f}", f"{d[1] / mib:.1f}", f"{d[3]:.1f}"],
        ["off (as before: nothing reclaimed)", str(o[2]), f"{o[0] / mib:.1f}", f"{o[1] / mib:.1f}", f"{o[3]:.1f}"],
    ])
    L += ["", f"`shimlog recover --all` on {n_dead} dead files (each one's 900 calls into its log): "
          f"{per_file:.1f} ms a file."]
    return sections.text(L)


def write(sec):
    sections.write(TITLE, sec)


if __name__ == "__main__":
    sections.main(measure, TITLE)
