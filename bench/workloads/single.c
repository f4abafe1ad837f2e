/* single.c: one thread, malloc/free pairs of mixed small sizes.
 *
 * A ring of SLOTS live blocks; each iteration frees the oldest block and mallocs a new one
 * of a pseudo-random size in 8..512 bytes (mostly under 128), writing its first bytes so the
 * block is really used. Every iteration is exactly one malloc and one free.
 *
 * Usage: single [ITERATIONS]   (default 1000000)
 * Prints one line on stdout: the number of malloc-family calls made and a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "rand.h"

#define SLOTS 256

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 1000000;
    uint64_t seed = 0x9e3779b97f4a7c15u, sum = 0;
    unsigned char *ring[SLOTS];
    long calls = 0;
    for (int i = 0; i < SLOTS; i++) {
        ring[i] = malloc(pick_size(&seed));
        ring[i][0] = (unsigned char)i;
        calls++;
    }
    for (long i = 0; i < iterations; i++) {
        unsigned slot = (unsigned)i % SLOTS;
        sum += ring[slot][0];
        free(ring[slot]);
        ring[slot] = malloc(pick_size(&seed));
        ring[slot][0] = (unsigned char)i;
        calls += 2;
    }
    for (int i = 0; i < SLOTS; i++) {
        sum += ring[i][0];
        free(ring[i]);
        calls++;
    }
    printf("single: calls=%ld checksum=%llu\n", calls, (unsigned long long)sum);
    return 0;
}
