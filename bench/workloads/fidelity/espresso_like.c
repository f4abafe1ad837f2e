/* espresso-like: one thread minimising a cover of bit-set cubes: every set operation makes
 * a fresh small block (8-200 bytes), covers are arrays grown with realloc, and most
 * results die young while a working set of a few thousand stays. Usage: espresso_like [passes] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int words; uint64_t b[]; } cube;
typedef struct { cube **c; int n, cap; } cover;

static uint64_t s = 0x1234567u;
static uint64_t rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }

static cube *mk(int words) { cube *c = malloc(sizeof(cube) + words * 8); c->words = words; for (int i = 0; i < words; i++) c->b[i] = rnd(); return c; }
static cube *op(const cube *a, const cube *b, int kind) {
  int w = a->words < b->words ? a->words : b->words;
  cube *r = malloc(sizeof(cube) + w * 8); r->words = w;
  for (int i = 0; i < w; i++) r->b[i] = kind ? a->b[i] & b->b[i] : a->b[i] | b->b[i];
  return r;
}
static void push(cover *v, cube *c) {
  if (v->n == v->cap) { v->cap = v->cap ? v->cap * 2 : 4; v->c = realloc(v->c, v->cap * sizeof(cube *)); }
  v->c[v->n++] = c;
}
static int pop(const cube *c) { int k = 0; for (int i = 0; i < c->words; i++) k += __builtin_popcountll(c->b[i]); return k; }

int main(int argc, char **argv) {
  long passes = argc > 1 ? atol(argv[1]) : 400;
  cover base = {0};
  for (int i = 0; i < 3000; i++) push(&base, mk(1 + rnd() % 24));
  long kept = 0;
  for (long p = 0; p < passes; p++) {
    cover next = {0};
    for (int i = 0; i < base.n; i++) {
      cover tmp = {0};
      for (int k = 0; k < 8; k++) {
        cube *x = op(base.c[i], base.c[rnd() % base.n], k & 1);
        if (pop(x) > x->words * 20) push(&tmp, x); else free(x);
      }
      if (tmp.n) { push(&next, tmp.c[0]); for (int k = 1; k < tmp.n; k++) free(tmp.c[k]); }
      else push(&next, op(base.c[i], base.c[i], 0));
      free(tmp.c);
    }
    for (int i = 0; i < base.n; i++) free(base.c[i]);
    free(base.c);
    base = next;
    kept += base.n;
  }
  for (int i = 0; i < base.n; i++) free(base.c[i]);
  free(base.c);
  printf("espresso_like: %ld passes, %ld cubes kept\n", passes, kept);
  return 0;
}
