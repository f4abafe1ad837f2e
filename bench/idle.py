"""What the shim's recorder thread costs a program that calls the allocator seldom or never
(the recorder's pace, shim/src/pace.rs), run by make bench and on its own:

    python3 bench/idle.py [--smoke] [--write] [REPS]

itest/programs/c/idle.c in its bench mode (`idle PERIOD_US SECONDS`) makes one malloc and one free
every PERIOD (never, every 100 ms, 10 ms, 5 ms, 1 ms; at 1 ms once more beside 1000 threads
that made one call each and sleep) for a few seconds under the shim, recording (the
default), and reads the other threads' voluntary context switches (the
recorder's wake-ups) and CPU time over that time from /proc/self/task. REPS runs each
(default 5), medians.

--write replaces the section "The recorder when the program is idle" of BENCHMARKS.md (or
appends it)."""
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sections  # noqa: E402
import workloads as wl  # noqa: E402

ROOT = wl.ROOT
TITLE = "## The recorder when the program is idle"

CASES = [
    ("no calls", 0, 0),
    ("a call every 100 ms", 100_000, 0),
    ("a call every 10 ms", 10_000, 0),
    ("a call every 5 ms", 5_000, 0),
    ("a call every 1 ms", 1_000, 0),
    ("a call every 1 ms, 1000 idle threads beside", 1_000, 1000),
]


def build():
    """itest/programs/c/idle.c built into the bench's binaries (again when the source is newer)."""
    src = os.path.join(ROOT, "itest", "programs", "c", "idle.c")
    exe = os.path.join(wl.BIN, "idle")
    if not os.path.exists(exe) or os.path.getmtime(src) > os.path.getmtime(exe):
        os.makedirs(wl.BIN, exist_ok=True)
        subprocess.run(["cc", "-O2", "-pthread", "-o", exe, src], check=True)
    return exe


def run_one(exe, period_us, secs, threads, logdir):
    env = wl.clean_env()
    env["LD_PRELOAD"] = wl.SHIM
    env["SHIM_LOG"] = os.path.join(logdir, "idle.%p.shimlog")
    out = subprocess.run([exe, str(period_us), str(secs), str(threads)], env=env, capture_output=True, text=True,
                         check=True)
    r = json.loads(out.stdout)
    for f in os.listdir(logdir):
        os.remove(os.path.join(logdir, f))
    return r["wakes"] / secs, r["cpu_ns"] / secs / 1e6


def measure(smoke, reps=None):
    reps = 1 if smoke else (reps or 5)
    secs = 0.3 if smoke else 3.0
    exe = build()
    rows = []
    with tempfile.TemporaryDirectory() as logdir:
        for name, period, threads in CASES:
            runs = [run_one(exe, period, secs, threads if not smoke else min(threads, 50), logdir)
                    for _ in range(reps)]
            wakes = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            rows.append([name, f"{wakes:.0f}", f"{cpu:.2f}", f"{cpu / 10:.3f}%"])
    L = sections.intro(TITLE, "python3 bench/idle.py --write", reps,
                       f"{secs:g} s each, medians; the recorder thread's wake-ups and CPU from /proc/self/task")
    L += ["", "While the program calls the allocator, the recorder ticks every 500 us: its watchdog must see a call "
          "on two ticks to call it slow. After 4 ticks without a call (up to 32, while calls keep cutting its dozes "
          "short) it dozes until the next RSS sample, and the first call any thread makes wakes it "
          "(docs/recording.md, \"The recorder's pace\"). Before that change (parent commit c23415d, the same program): "
          "1,680-1,700 wake-ups and 44-47 ms of CPU a second whether the program called the allocator or not.", ""]
    L += sections.table(["program", "recorder wake-ups a second", "recorder CPU ms a second", "of a core"], rows)
    L += ["", "A program that calls the allocator every few ms keeps the recorder at its busy pace: a doze there "
          "would end within a few ms, and each costs a membarrier (an interrupt of every CPU running the program's "
          "threads) and the waking call a futex wake (a few us, outside the time the call records), so the "
          "recorder waits longer before the next one. Each tick looks at every thread the shim knows, sleeping or "
          "not: the last row is what 1000 of them add (the registry is an array, so those loads go out together; "
          "as a linked list, before commit fec26b6, they cost one cache miss after another: 255-319 ms of recorder "
          "CPU in 3 s against 182-233 now, and 150-160 without the threads, in 2 alternated runs by hand)."]
    return sections.text(L)


def write(sec):
    sections.write(TITLE, sec)


if __name__ == "__main__":
    sections.main(measure, TITLE)
