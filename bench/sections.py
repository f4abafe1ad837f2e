"""What the bench scripts that rewrite a section of BENCHMARKS.md of their own (stacks.py,
sampled.py, threads.py) share: the section's opening lines and its markdown tables,
replacing that section by its title, and their command line

    python3 bench/NAME.py [--smoke] [--write] [REPS]

(--smoke: one repetition at tiny sizes, to check it works, writing nothing; --write: the
section replaces its old text in BENCHMARKS.md, or is appended)."""
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


def write(title, sec):
    p = os.path.join(ROOT, "BENCHMARKS.md")
    text = open(p).read() if os.path.exists(p) else ""
    m = re.search(r"^" + re.escape(title) + r"\n.*?(?=^## |\Z)", text, flags=re.S | re.M)
    text = text[:m.start()] + sec + "\n" + text[m.end():] if m else text.rstrip("\n") + "\n\n" + sec
    open(p, "w").write(text)


def main(measure, title):
    """`measure(smoke, reps)` gives the section's text."""
    smoke = "--smoke" in sys.argv
    nums = [a for a in sys.argv[1:] if a.isdigit()]
    sec = measure(smoke, int(nums[0]) if nums else None)
    print(sec)
    if "--write" in sys.argv and not smoke:
        write(title, sec)
