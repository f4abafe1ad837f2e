/* malloc-large-like: one worker thread keeping 20 large buffers (5-25 MiB) and replacing a
 * random one at each step with a fresh buffer of a random size, every byte of which it
 * writes (as a program filling each buffer it gets). Usage: malloc_large_like [steps] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long steps = 300;

static void *run(void *arg) {
  enum { N = 20 };
  char *buf[N] = {0}; uint64_t s = 42; long sum = 0;
  for (long i = 0; i < steps; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    int k = s % N; size_t n = (5u << 20) + (s >> 16) % (20u << 20);
    free(buf[k]);
    buf[k] = malloc(n);
    memset(buf[k], 'x', n);
    __asm__ volatile("" : : "r"(buf[k]) : "memory"); /* the program uses the block */
    sum += buf[k][n / 2];
  }
  for (int k = 0; k < N; k++) free(buf[k]);
  return (void *)sum;
}

int main(int argc, char **argv) {
  if (argc > 1) steps = atol(argv[1]);
  pthread_t t; void *r;
  pthread_create(&t, NULL, run, NULL);
  pthread_join(t, &r);
  printf("malloc_large_like: %ld buffers of 5-25 MiB, check %ld\n", steps, (long)r);
  return 0;
}
