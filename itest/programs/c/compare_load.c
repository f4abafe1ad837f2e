/* A paced workload for `shimlog compare`'s tests: a service that keeps LIVE_KIB of blocks
 * (256 B to 8 KiB, touched) live and, every millisecond for DURATION_MS, replaces
 * PER_MS of them (a free, a short-lived block made and freed, the block made again:
 * four calls each), then sleeps to the next millisecond.
 *
 *   compare_load [LIVE_KIB=32768] [PER_MS=100] [DURATION_MS=3000] [SEED=1]
 *
 * A block is made again at its own size, so the live bytes stay as built: they scale with
 * LIVE_KIB alone, the calls per second with PER_MS alone, and two runs with one SEED make
 * the same calls. Prints the live bytes at the end. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t state;

static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

int main(int argc, char **argv) {
    long live_kib = argc > 1 ? atol(argv[1]) : 32768;
    long per_ms = argc > 2 ? atol(argv[2]) : 100;
    long dur_ms = argc > 3 ? atol(argv[3]) : 3000;
    state = (argc > 4 ? strtoull(argv[4], NULL, 10) : 1) * 0x9e3779b97f4a7c15ull + 1;
    size_t target = (size_t)live_kib * 1024, live = 0, n = 0, cap = target / 256 + 1;
    void **slot = malloc(cap * sizeof *slot);
    size_t *size = malloc(cap * sizeof *size);
    if (!slot || !size)
        return 1;
    while (live < target && n < cap) {
        size_t sz = 256 + next() % (8192 - 256);
        slot[n] = malloc(sz);
        if (!slot[n])
            return 1;
        memset(slot[n], 1, sz);
        size[n++] = sz;
        live += sz;
    }
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    for (long ms = 0; ms < dur_ms; ms++) {
        for (long i = 0; i < per_ms; i++) {
            size_t k = next() % n;
            free(slot[k]);
            void *tmp = malloc(16 + next() % 1008);
            slot[k] = malloc(size[k]);
            if (!slot[k] || !tmp)
                return 1;
            memset(slot[k], 2, size[k] < 64 ? size[k] : 64);
            free(tmp);
        }
        t.tv_nsec += 1000000;
        if (t.tv_nsec >= 1000000000) {
            t.tv_nsec -= 1000000000;
            t.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
    }
    printf("%zu live bytes\n", live);
    for (size_t i = 0; i < n; i++)
        free(slot[i]);
    free(slot);
    free(size);
    return 0;
}
