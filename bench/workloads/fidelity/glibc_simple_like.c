/* glibc-simple-like: glibc's bench-malloc-simple pattern on 4 threads: each allocates a
 * batch of blocks of one size, writes each, frees them all, for sizes 16 to 4096.
 * Usage: glibc_simple_like [rounds] [threads] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long rounds = 4000;

static void *run(void *arg) {
  long sum = 0; void *p[400];
  static const int sizes[] = {16, 32, 64, 128, 256, 512, 1024, 4096};
  for (long r = 0; r < rounds; r++)
    for (int s = 0; s < 8; s++) {
      int n = 25 << (r % 3 == 0 ? 2 : (int)(r % 2));
      for (int i = 0; i < n; i++) { p[i] = malloc(sizes[s]); *(volatile char *)p[i] = (char)i; }
      for (int i = 0; i < n; i++) { sum += *(char *)p[i]; free(p[i]); }
    }
  return (void *)sum;
}

int main(int argc, char **argv) {
  if (argc > 1) rounds = atol(argv[1]);
  int nt = argc > 2 ? atoi(argv[2]) : 4;
  pthread_t t[64]; long total = 0;
  for (int i = 0; i < nt; i++) pthread_create(&t[i], NULL, run, NULL);
  for (int i = 0; i < nt; i++) { void *r; pthread_join(t[i], &r); total += (long)r; }
  printf("glibc_simple_like: %d threads x %ld rounds, check %ld\n", nt, rounds, total);
  return 0;
}
