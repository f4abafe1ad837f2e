/* clock_cost.c: what the shim's timestamps cost inside a malloc/free loop, without the shim.
 *
 * The loop of single.c (a ring of 256 blocks; free the oldest, malloc a new one of 8..512
 * bytes), timed with the time-stamp counter read where the shim reads it:
 *   none          no timestamps (the bare loop)
 *   shim          RDTSC before free, RDTSCP after malloc (the shim's stamps: an allocation is
 *                 stamped after every earlier instruction has completed)
 *   rdtsc         RDTSC before free and after malloc
 *   lfence_rdtsc  RDTSC before free, LFENCE; RDTSC after malloc
 * Each mode runs REPEATS times, interleaved; the minimum is printed, in ns per malloc+free
 * pair (two events).
 *
 * Usage: clock_cost [PAIRS_PER_RUN] [REPEATS]   (default 500000, 7) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "rand.h"
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define SLOTS 256
enum { NONE, SHIM, RDTSC, LFENCE_RDTSC, NMODES };
static const char *names[NMODES] = {"none", "shim", "rdtsc", "lfence_rdtsc"};

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static volatile uint64_t sink;

static double run(int mode, long pairs, unsigned char **ring) {
    uint64_t seed = 0x9e3779b97f4a7c15u, acc = 0;
    double t0 = now_ns();
    for (long i = 0; i < pairs; i++) {
        unsigned slot = (unsigned)i % SLOTS;
        uint64_t r = next_rand(&seed);
        size_t size = r % 4 ? 8 + (r >> 8) % 120 : 8 + (r >> 8) % 504;
#if defined(__x86_64__)
        if (mode != NONE) acc += __rdtsc();
#endif
        free(ring[slot]);
        ring[slot] = malloc(size);
#if defined(__x86_64__)
        unsigned aux;
        if (mode == SHIM) acc += __rdtscp(&aux);
        if (mode == RDTSC) acc += __rdtsc();
        if (mode == LFENCE_RDTSC) {
            _mm_lfence();
            acc += __rdtsc();
        }
#endif
        ring[slot][0] = (unsigned char)i;
    }
    double t1 = now_ns();
    sink = acc;
    return (t1 - t0) / pairs;
}

int main(int argc, char **argv) {
#if !defined(__x86_64__)
    printf("clock_cost: not x86-64\n");
    return 0;
#endif
    long pairs = argc > 1 ? atol(argv[1]) : 500000;
    int repeats = argc > 2 ? atoi(argv[2]) : 7;
    unsigned char *ring[SLOTS];
    for (int i = 0; i < SLOTS; i++) ring[i] = malloc(16);
    double best[NMODES];
    for (int m = 0; m < NMODES; m++) best[m] = 1e30;
    for (int k = 0; k < repeats; k++)
        for (int m = 0; m < NMODES; m++) {
            double ns = run(m, pairs, ring);
            if (ns < best[m]) best[m] = ns;
        }
    printf("clock_cost:");
    for (int m = 0; m < NMODES; m++) printf(" %s=%.2f", names[m], best[m]);
    printf(" (ns per malloc+free pair, min of %d runs of %ld pairs)\n", repeats, pairs);
    for (int i = 0; i < SLOTS; i++) free(ring[i]);
    return 0;
}
