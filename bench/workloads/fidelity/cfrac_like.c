/* cfrac-like: one thread doing bignum arithmetic, every result a fresh small block and
 * every temporary freed at once (the pattern of cfrac's continued-fraction factoring:
 * millions of 20-200 byte blocks, a few dozen live). Usage: cfrac_like [steps] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int n; uint32_t d[]; } big;

static big *bnew(int n) { big *b = malloc(sizeof(big) + (size_t)n * 4); b->n = n; return b; }

static big *bmul(const big *a, const big *b, int cap) {
  int n = a->n + b->n; if (n > cap) n = cap;
  big *r = bnew(n); memset(r->d, 0, (size_t)n * 4);
  for (int i = 0; i < a->n && i < n; i++) {
    uint64_t c = 0;
    for (int j = 0; j < b->n && i + j < n; j++) {
      uint64_t t = (uint64_t)a->d[i] * b->d[j] + r->d[i + j] + c;
      r->d[i + j] = (uint32_t)t; c = t >> 32;
    }
  }
  return r;
}

static big *badd(const big *a, const big *b) {
  const big *x = a->n >= b->n ? a : b, *y = a->n >= b->n ? b : a;
  big *r = bnew(x->n + 1); uint64_t c = 0;
  for (int i = 0; i < x->n; i++) { uint64_t t = (uint64_t)x->d[i] + (i < y->n ? y->d[i] : 0) + c; r->d[i] = (uint32_t)t; c = t >> 32; }
  r->d[x->n] = (uint32_t)c; if (!c) r->n--;
  return r;
}

int main(int argc, char **argv) {
  long steps = argc > 1 ? atol(argv[1]) : 10000000;
  enum { LIVE = 48 };
  big *v[LIVE]; uint64_t s = 88172645463325252ull;
  for (int i = 0; i < LIVE; i++) { v[i] = bnew(1 + i % 6); for (int k = 0; k < v[i]->n; k++) v[i]->d[k] = (uint32_t)(i * 2654435761u + k); }
  uint64_t check = 0;
  for (long i = 0; i < steps; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    int a = s % LIVE, b = (s >> 8) % LIVE, c = (s >> 16) % LIVE;
    big *p = bmul(v[a], v[b], 2 + (int)((s >> 24) % 12));
    big *q = badd(p, v[c]);
    free(p);
    check += q->d[0];
    free(v[c]); v[c] = q;
  }
  for (int i = 0; i < LIVE; i++) free(v[i]);
  printf("cfrac_like: %ld steps, check %llu\n", steps, (unsigned long long)check);
  return 0;
}
