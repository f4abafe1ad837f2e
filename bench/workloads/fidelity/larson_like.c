/* larson-like: a server's pattern. Each of 4 worker threads owns a table of blocks and
 * replaces random ones (free, then malloc of a random 16-1024 byte size); after its share
 * of replacements it hands its table to a fresh thread and exits, so blocks are freed by
 * threads other than the one that allocated them, after that one has gone.
 * Usage: larson_like [generations] [replacements_per_thread] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 2000
#define WORKERS 4
typedef struct { char *b[SLOTS]; uint64_t seed; long reps; int gen, gens; } table;

static void *worker(void *arg) {
  table *t = arg;
  for (long i = 0; i < t->reps; i++) {
    uint64_t x = t->seed; x ^= x << 13; x ^= x >> 7; x ^= x << 17; t->seed = x;
    int k = x % SLOTS; size_t n = 16 + (x >> 20) % 1009;
    free(t->b[k]);
    t->b[k] = malloc(n); t->b[k][0] = (char)n; t->b[k][n - 1] = 1;
  }
  if (++t->gen < t->gens) {
    pthread_t next;
    pthread_create(&next, NULL, worker, t);
    pthread_detach(next);
  } else {
    t->gen = -1;
  }
  return NULL;
}

int main(int argc, char **argv) {
  int gens = argc > 1 ? atoi(argv[1]) : 40;
  long reps = argc > 2 ? atol(argv[2]) : 60000;
  static table t[WORKERS];
  for (int w = 0; w < WORKERS; w++) {
    t[w].seed = 0x9e3779b97f4a7c15ull * (w + 1); t[w].reps = reps; t[w].gens = gens;
    for (int k = 0; k < SLOTS; k++) t[w].b[k] = malloc(16 + k % 500);
  }
  for (int w = 0; w < WORKERS; w++) { pthread_t p; pthread_create(&p, NULL, worker, &t[w]); pthread_detach(p); }
  for (int w = 0; w < WORKERS; w++)
    while (__atomic_load_n(&t[w].gen, __ATOMIC_ACQUIRE) != -1) { struct timespec ts = {0, 1000000}; nanosleep(&ts, NULL); }
  for (int w = 0; w < WORKERS; w++) for (int k = 0; k < SLOTS; k++) free(t[w].b[k]);
  printf("larson_like: %d workers x %d generations x %ld replacements\n", WORKERS, gens, reps);
  return 0;
}
