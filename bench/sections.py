"""What the bench scripts that rewrite a section of BENCHMARKS.md of their own (stacks.py,
sampled.py, threads.py) share: the section's opening lines and its markdown tables,
replacing that section by its title, and their command line

    python3 bench/NAME.py [--smoke] [--write] [REPS]

(--smoke: one repetition at tiny sizes, to check it works, writing nothing; --write: the
section goes into bench/results.json, stamped with its commit, and BENCHMARKS.md is
rendered whole from that file again). `make bench` measures every section and renders
BENCHMARKS.md once, from this run's results alone."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def intro(title, cmd, reps, how):
    """A section's first lines: its title and the command that measured it, with `how`
    (how the runs were made and summed up)."""
    return [title, "", f"`{cmd}` ({reps} repetitions, {how}; this shared 2-core machine is noisy)."]


def row(cells):
    """One markdown table line of the (already formatted) cells."""
    return "| " + " | ".join(cells) + " |"


def table(columns, rows):
    """A markdown table's lines: the column names, the rule under them, a line a row."""
    return [row(columns), "|" + "---|" * len(columns)] + [row(r) for r in rows]


def text(lines):
    """A section's text from its lines."""
    return "\n".join(lines) + "\n"


def commit():
    """The short commit of the working tree the section is measured on."""
    import subprocess
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def record(results, title, sec):
    """Puts the section measured in this run into `results` (bench/results.json's dict):
    BENCHMARKS.md is rendered whole from it (report.markdown), nothing taken from an older
    BENCHMARKS.md."""
    import time
    results.setdefault("sections", {})[title] = {
        "text": sec, "commit": commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def write(title, sec):
    """A section measured alone (`python3 bench/NAME.py --write`): put into
    bench/results.json, stamped with its own commit and date, and BENCHMARKS.md rendered whole
    again from it (the section then says it was measured apart from the rest)."""
    import json
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import report
    p = os.path.join(ROOT, "bench", "results.json")
    results = json.load(open(p))
    record(results, title, sec)
    with open(p, "w") as f:
        json.dump(results, f, indent=1, sort_keys=False)
        f.write("\n")
    with open(os.path.join(ROOT, "BENCHMARKS.md"), "w") as f:
        f.write(report.markdown(results))


def main(measure, title):
    """`measure(smoke, reps)` gives the section's text."""
    smoke = "--smoke" in sys.argv
    nums = [a for a in sys.argv[1:] if a.isdigit()]
    sec = measure(smoke, int(nums[0]) if nums else None)
    print(sec)
    if "--write" in sys.argv and not smoke:
        write(title, sec)
