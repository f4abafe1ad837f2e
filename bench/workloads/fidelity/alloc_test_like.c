/* alloc-test-like: one thread, a table of 20,000 blocks replaced at random, sizes drawn
 * mostly small with a long tail up to 64 KiB, some grown with realloc, each written
 * where it begins and ends. Usage: alloc_test_like [replacements] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 20000
static uint64_t s = 42;
static uint64_t rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
static size_t size(void) {
  uint64_t x = rnd(); int k = x % 100;
  if (k < 70) return 8 + (x >> 8) % 120;
  if (k < 95) return 128 + (x >> 8) % 2048;
  return 2048 + (x >> 8) % 63488;
}

int main(int argc, char **argv) {
  long reps = argc > 1 ? atol(argv[1]) : 6000000;
  static char *b[SLOTS]; static size_t n[SLOTS]; long sum = 0;
  for (long i = 0; i < reps; i++) {
    int k = rnd() % SLOTS;
    if (b[k] && rnd() % 10 == 0) {
      n[k] += n[k] / 2 + 1; b[k] = realloc(b[k], n[k]);
    } else {
      free(b[k]); n[k] = size(); b[k] = malloc(n[k]);
    }
    b[k][0] = 1; b[k][n[k] - 1] = 2; sum += b[k][n[k] / 2];
  }
  for (int k = 0; k < SLOTS; k++) free(b[k]);
  printf("alloc_test_like: %ld replacements, check %ld\n", reps, sum);
  return 0;
}
