/* rand.h: the bench workloads' pseudo-random numbers and block sizes, one definition for
 * all of them (single.c, threads8.c, prodcons.c, clock_cost.c, realloc_aligned.c), so that
 * they draw the same sequences. Each program keeps its own seeds.
 *
 * Built by bench/run.sh and the bench scripts, which rebuild a workload when this header
 * is newer than its binary. */
#ifndef BENCH_RAND_H
#define BENCH_RAND_H

#include <stddef.h>
#include <stdint.h>

/* xorshift64: the next number of the sequence seeded by *s (never 0). */
static inline uint64_t next_rand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A small block's size: 8..127 bytes three times in four, else 8..511. */
static inline size_t pick_size(uint64_t *s) {
    uint64_t r = next_rand(s);
    if (r % 4 != 0) return 8 + (r >> 8) % 120;
    return 8 + (r >> 8) % 504;
}

#endif
