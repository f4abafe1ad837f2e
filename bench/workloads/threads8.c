/* threads8.c: THREADS threads (default 8) allocating at once, as a server's workers do.
 *
 * Each thread runs single.c's loop on a ring of its own (free the oldest block, malloc a
 * new one of 8..512 bytes, mostly under 128), and every 16th block it makes goes to the
 * next thread's ring instead, so one free in 16 is cross-thread, as in a server handing
 * requests between workers. Every iteration is exactly one malloc and one free.
 *
 * Usage: threads8 [ITERATIONS_PER_THREAD] [THREADS]   (default 500000 8)
 * Prints one line on stdout: the calls made, the threads, and a checksum. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "rand.h"

#define SLOTS 256
#define MAXT 64

static long iterations = 500000;
static int nthreads = 8;
/* Per thread: a mailbox of one block handed over by the previous thread. */
static void *_Atomic mailbox[MAXT];
static long calls[MAXT];
static uint64_t sums[MAXT];

static void *worker(void *arg) {
    int me = (int)(intptr_t)arg, next = (me + 1) % nthreads;
    uint64_t seed = 0x9e3779b97f4a7c15u * (uint64_t)(me + 1), sum = 0;
    unsigned char *ring[SLOTS];
    long n = 0;
    for (int i = 0; i < SLOTS; i++) {
        ring[i] = malloc(pick_size(&seed));
        ring[i][0] = (unsigned char)i;
        n++;
    }
    for (long i = 0; i < iterations; i++) {
        unsigned slot = (unsigned)i % SLOTS;
        unsigned char *old = ring[slot];
        sum += old[0];
        if (i % 16 == 15) {
            /* Hand the oldest block to the next thread; free what it handed us, if any. */
            void *mine = __atomic_exchange_n(&mailbox[next], old, __ATOMIC_ACQ_REL);
            old = mine;
        }
        if (old) free(old);
        else n--; /* nothing to free this time: one call fewer */
        ring[slot] = malloc(pick_size(&seed));
        ring[slot][0] = (unsigned char)i;
        n += 2;
    }
    for (int i = 0; i < SLOTS; i++) {
        sum += ring[i][0];
        free(ring[i]);
        n++;
    }
    calls[me] = n;
    sums[me] = sum;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) iterations = atol(argv[1]);
    if (argc > 2) nthreads = atoi(argv[2]);
    if (nthreads < 1 || nthreads > MAXT) {
        fprintf(stderr, "threads8: THREADS must be 1 to %d\n", MAXT);
        return 2;
    }
    pthread_t t[MAXT];
    for (int i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    long total = 0;
    uint64_t sum = 0;
    for (int i = 0; i < nthreads; i++) {
        total += calls[i];
        sum += sums[i];
        void *left = mailbox[i];
        if (left) {
            free(left);
            total++;
        }
    }
    printf("threads8: calls=%ld threads=%d sum=%llu\n", total, nthreads, (unsigned long long)sum);
    return 0;
}
