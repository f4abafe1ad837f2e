/* realloc_aligned.c: realloc growth and aligned allocations, one thread.
 *
 * Each iteration grows a buffer from nothing with realloc (realloc(NULL, n) first, then
 * about 1.5x per step, up to a pseudo-random final size of 64 bytes..16 KiB), writing its
 * end each time, then frees it; and makes one posix_memalign, one aligned_alloc and one
 * memalign of pseudo-random power-of-two alignments (16..4096) and small sizes, checks their
 * alignment, and frees them.
 *
 * Usage: realloc_aligned [ITERATIONS]   (default 200000)
 * Prints one line: the number of malloc-family calls made, and how many results were
 * misaligned (or failed). */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "rand.h"

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 200000;
    uint64_t seed = 0x853c49e6748fea9bu;
    long calls = 0, misaligned = 0;
    /* realloc(NULL, n) through a volatile pointer so the compiler cannot turn it into malloc */
    char *volatile start = NULL;
    for (long i = 0; i < iterations; i++) {
        uint64_t r = next_rand(&seed);
        size_t final = 64 + (r >> 8) % (16384 - 64);
        size_t n = 16 + (r >> 40) % 48;
        char *p = start;
        for (;;) {
            p = realloc(p, n);
            p[n - 1] = (char)n;
            calls++;
            if (n >= final) break;
            n = n + n / 2 > final ? final : n + n / 2;
        }
        free(p);
        calls++;

        size_t a1 = (size_t)16 << (r % 9), a2 = (size_t)16 << ((r >> 4) % 9),
               a3 = (size_t)16 << ((r >> 12) % 9);
        size_t s = 8 + (r >> 20) % 500;
        void *q1 = NULL;
        if (posix_memalign(&q1, a1, s) != 0) misaligned++;
        void *q2 = aligned_alloc(a2, (s + a2 - 1) / a2 * a2);
        void *q3 = memalign(a3, s);
        if ((uintptr_t)q1 % a1 || (uintptr_t)q2 % a2 || (uintptr_t)q3 % a3) misaligned++;
        ((char *)q1)[0] = ((char *)q2)[0] = ((char *)q3)[0] = 1;
        free(q1);
        free(q2);
        free(q3);
        calls += 6;
    }
    printf("realloc_aligned: calls=%ld misaligned=%ld\n", calls, misaligned);
    return 0; /* the bench checks misaligned=0 itself and still wants the timing */
}
