"""Firefox ESR's headless screenshot under the shim (issue #41), run by make bench and on its own:

    python3 bench/firefox.py [--smoke] [--write] [REPS]

Debian's firefox-esr (its executable brings mozjemalloc) takes a headless screenshot of a
local page whose script allocates (itest/tests/firefox.rs's page), with a fresh profile each
time: bare; under `shimlog record` (mozjemalloc kept, recorded); under `shimlog run`
(SHIM_TRACE=0); and with each backend serving it, nothing recorded (`shimlog run --backend`)
and recorded (`shimlog record --backend`). The wall time of the whole command (the browser's
start-up, its content processes, the page, the screenshot, its exit); REPS runs each (default
3), medians. A run that fails or writes no screenshot is shown as such.

--write replaces the section of BENCHMARKS.md (or appends it)."""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sections  # noqa: E402
import workloads as wl  # noqa: E402

TITLE = "## Firefox ESR: a headless screenshot (bench/firefox.py)"


def page():
    """The page of itest/tests/firefox.rs (the one constant there, PAGE)."""
    src = open(os.path.join(wl.ROOT, "itest", "tests", "firefox.rs")).read()
    m = re.search(r'const PAGE: &str = r#"(.*?)"#;', src, re.S)
    if not m:
        raise RuntimeError("itest/tests/firefox.rs has no PAGE")
    return m.group(1)


def one(ff, work, prefix):
    """Seconds of one screenshot with `prefix` before the browser's command, or None when it
    failed (exit status not 0, or no screenshot)."""
    run = tempfile.mkdtemp(dir=work)
    for d in ("home", "profile"):
        os.mkdir(os.path.join(run, d))
    shot = os.path.join(run, "shot.png")
    argv = prefix(run) + [ff, "--headless", "--no-remote", "--profile", os.path.join(run, "profile"),
                          "--screenshot", shot, "file://" + os.path.join(work, "page.html")]
    env = wl.clean_env()
    env.update({"HOME": os.path.join(run, "home"), "MOZ_HEADLESS": "1", "MOZ_CRASHREPORTER_DISABLE": "1"})
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    t0 = time.monotonic()
    r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    dt = time.monotonic() - t0
    ok = r.returncode == 0 and os.path.exists(shot) and os.path.getsize(shot) > 0
    shutil.rmtree(run, ignore_errors=True)
    return dt if ok else None


def configs():
    rec = lambda *a: (lambda run: [wl.SHIMLOG, "record", "-q", "-o", os.path.join(run, "logs"), *a, "--"])  # noqa: E731
    untraced = lambda *a: (lambda run: [wl.SHIMLOG, "run", *a, "--"])  # noqa: E731
    out = [("bare", lambda run: []), ("recorded (mozjemalloc kept)", rec()),
           ("SHIM_TRACE=0 (mozjemalloc kept)", untraced())]
    for b in wl.BACKENDS:
        out.append((f"switched to {b}, not recorded", untraced("--backend", b)))
        out.append((f"switched to {b}, recorded", rec("--backend", b)))
    return out


def measure(smoke=False, reps=None):
    ff = shutil.which("firefox-esr")
    lines = sections.intro(TITLE, "python3 bench/firefox.py", reps or (1 if smoke else 3),
                           "median wall seconds of the whole command, a fresh profile each run")
    if not ff:
        return sections.text(lines + ["", "Not measured: firefox-esr is missing (apt-get install firefox-esr)."])
    reps = reps or (1 if smoke else 3)
    work = tempfile.mkdtemp(prefix="bench-firefox-")
    try:
        with open(os.path.join(work, "page.html"), "w") as f:
            f.write(page())
        plan = configs()[:3] if smoke else configs()
        rows = []
        base = None
        for name, prefix in plan:
            times = [one(ff, work, prefix) for _ in range(reps)]
            good = [t for t in times if t is not None]
            if len(good) < len(times):
                rows.append([name, f"failed {len(times) - len(good)} of {len(times)}", ""])
                if smoke:
                    raise RuntimeError(f"firefox {name}: failed")
                continue
            med = statistics.median(good)
            base = base or med
            rows.append([name, f"{med:.2f}", f"{med / base:.2f}x"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ver = subprocess.run([ff, "--version"], capture_output=True, text=True).stdout.strip()
    return sections.text(lines + ["", f"{ver}; the page of itest/tests/firefox.rs.", ""]
                         + sections.table(["configuration", "wall s", "vs bare"], rows))


if __name__ == "__main__":
    sections.main(measure, TITLE)
