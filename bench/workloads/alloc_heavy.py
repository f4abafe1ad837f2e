"""Allocation-heavy Python: run with PYTHONMALLOC=malloc so every object goes to malloc.

Each round builds a dict of small lists, tuples and strings, joins and splits strings,
sorts, and drops it all. Usage: python3 alloc_heavy.py [ROUNDS]  (default 2000)."""
import sys

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
total = 0
for i in range(rounds):
    d = {f"k{i}-{j}": [j, str(j) * 3, (j, j + 1.5)] for j in range(60)}
    words = " ".join(d).split()
    words.sort(key=lambda w: w[::-1])
    total += len(words) + sum(len(v[1]) for v in d.values())
    total += len({w[:3] for w in words})
print(f"alloc_heavy: rounds={rounds} total={total}")
