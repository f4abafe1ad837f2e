/* budget_loop.c: the fixed workload of the instruction budgets (itest/tests/budget.rs).
 *
 * One thread, malloc/free pairs of mixed small sizes from a fixed seed (as
 * bench/workloads/single.c): a ring of SLOTS live blocks; each iteration frees the oldest block
 * and mallocs a new one of a pseudo-random size in 8..512 bytes (mostly under 128), writing its
 * first byte. Every iteration is exactly one malloc and one free, so runs of two sizes differ
 * by exactly 2 x (the difference in ITERATIONS) calls.
 *
 * Usage: budget_loop ITERATIONS
 * Prints one line: "calls=N checksum=C" (N the malloc-family calls made). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 256

static uint64_t next_rand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t pick_size(uint64_t *s) {
    uint64_t r = next_rand(s);
    if (r % 4 != 0) return 8 + (r >> 8) % 120;
    return 8 + (r >> 8) % 504;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: budget_loop ITERATIONS\n");
        return 2;
    }
    long iterations = atol(argv[1]);
    uint64_t seed = 0x9e3779b97f4a7c15u, sum = 0;
    unsigned char *ring[SLOTS];
    long calls = 0;
    for (int i = 0; i < SLOTS; i++) {
        ring[i] = malloc(pick_size(&seed));
        if (!ring[i]) return 1;
        ring[i][0] = (unsigned char)i;
        calls++;
    }
    for (long i = 0; i < iterations; i++) {
        unsigned slot = (unsigned)(i % SLOTS);
        sum += ring[slot][0];
        free(ring[slot]);
        ring[slot] = malloc(pick_size(&seed));
        if (!ring[slot]) return 1;
        ring[slot][0] = (unsigned char)i;
        calls += 2;
    }
    for (int i = 0; i < SLOTS; i++) {
        sum += ring[i][0];
        free(ring[i]);
        calls++;
    }
    printf("calls=%ld checksum=%llu\n", calls, (unsigned long long)sum);
    return 0;
}
