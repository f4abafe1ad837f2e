/* mstress-like: many short-lived threads, 3 alive at a time; each allocates and frees
 * blocks of linearly random sizes (1% a hundred times larger), writes every word of them,
 * keeps a retained set to the end, and swaps blocks with the others through a shared
 * exchange array, so blocks are freed by threads that did not allocate them, often after
 * their allocating thread exited. Usage: mstress_like [threads] [allocs_per_thread] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define XFER 1000
static _Atomic(uintptr_t *) xfer[XFER];
static long allocs_per = 2000;

static uint64_t rnd(uint64_t *s) { uint64_t x = *s += 0x9e3779b97f4a7c15ull; x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull; x = (x ^ (x >> 27)) * 0x94d049bb133111ebull; return x ^ (x >> 31); }

static uintptr_t *items(size_t n, uint64_t *r) {
  if (rnd(r) % 100 == 0) n *= 100;
  uintptr_t *p = malloc(n * sizeof(uintptr_t));
  for (size_t i = 0; i < n; i++) p[i] = n - i;
  return p;
}

static void drop(uintptr_t *p) {
  if (p && p[0] == 0) abort();
  free(p);
}

static void *stress(void *arg) {
  uint64_t r = (uintptr_t)arg * 7919 + 42;
  long allocs = allocs_per * (1 + (uintptr_t)arg % 4), retain = allocs / 4;
  uintptr_t **data = NULL, **kept = malloc(retain * sizeof(void *));
  size_t cap = 0, top = 0, ktop = 0;
  while (allocs > 0 || retain > 0) {
    if (retain == 0 || (rnd(&r) % 100 < 70 && allocs > 0)) {
      allocs--;
      if (top >= cap) { cap += 4096; data = realloc(data, cap * sizeof(void *)); }
      data[top++] = items(rnd(&r) % 128 + 1, &r);
    } else {
      kept[ktop++] = items(10 * (rnd(&r) % 128 + 1), &r); retain--;
    }
    if (rnd(&r) % 100 < 66 && top > 0) { size_t i = rnd(&r) % top; drop(data[i]); data[i] = NULL; }
    if (rnd(&r) % 100 < 25 && top > 0) { size_t i = rnd(&r) % top; data[i] = atomic_exchange(&xfer[rnd(&r) % XFER], data[i]); }
  }
  for (size_t i = 0; i < ktop; i++) drop(kept[i]);
  for (size_t i = 0; i < top; i++) drop(data[i]);
  free(kept); free(data);
  return NULL;
}

int main(int argc, char **argv) {
  long threads = argc > 1 ? atol(argv[1]) : 300;
  if (argc > 2) allocs_per = atol(argv[2]);
  pthread_t alive[3];
  for (long i = 0; i < threads; i++) {
    if (i >= 3) pthread_join(alive[i % 3], NULL);
    pthread_create(&alive[i % 3], NULL, stress, (void *)(uintptr_t)i);
  }
  for (long i = threads > 3 ? threads - 3 : 0; i < threads; i++) pthread_join(alive[i % 3], NULL);
  for (int i = 0; i < XFER; i++) drop(xfer[i]);
  printf("mstress_like: %ld threads, 3 alive at a time\n", threads);
  return 0;
}
