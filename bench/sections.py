"""What the bench scripts that rewrite a section of BENCHMARKS.md of their own (stacks.py,
sampled.py, threads.py) share: replacing that section by its title, and their command line

    python3 bench/NAME.py [--smoke] [--write] [REPS]

(--smoke: one repetition at tiny sizes, to check it works, writing nothing; --write: the
section replaces its old text in BENCHMARKS.md, or is appended)."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
