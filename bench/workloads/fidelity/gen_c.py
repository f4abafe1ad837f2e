"""Writes a C file of N functions for gcc's cc1 to compile in the replay fidelity bench.

Usage: python3 gen_c.py N OUT.c. Each function has loops, a switch, a local struct array
and calls into the previous ones, so that -O2 inlines, unrolls and allocates as it does on
real code."""
import sys

n, out = int(sys.argv[1]), sys.argv[2]
with open(out, "w") as f:
    f.write("#include <stddef.h>\nstruct item { int k; double v; const char *name; struct item *next; };\n")
    for i in range(n):
        prev = f"g{i - 1}(a) + b" if i else "a + b"
        f.write(f"""
static int f{i}(int a, int b) {{
  struct item it[{4 + i % 13}];
  int acc = {prev};
  for (int j = 0; j < (int)(sizeof it / sizeof it[0]); j++) {{
    it[j].k = a * j + b; it[j].v = acc * 0.5 + j; it[j].name = "f{i}"; it[j].next = j ? &it[j - 1] : NULL;
    switch ((a + j) % {3 + i % 7}) {{
      case 0: acc += it[j].k; break;
      case 1: acc ^= (int)it[j].v; break;
      case 2: for (struct item *p = &it[j]; p; p = p->next) acc += p->k % 7; break;
      default: acc -= j * {i % 11 + 1};
    }}
  }}
  return acc;
}}
__attribute__((noinline)) int g{i}(int x) {{ return f{i}(x, {i}) + {i % 5}; }}
""")
