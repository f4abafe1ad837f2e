/* xthread.c: 8 threads in a ring; in each round every thread allocates a batch of blocks
 * and the next thread (i+1 mod 8) frees them, so every block is freed by a thread other
 * than the one that made it. Prints one JSON object with each thread's kernel tid and what
 * it did. Usage: xthread [ROUNDS] [PER_ROUND] (default 40 x 64). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NT 8
/* Sizes no C runtime call uses, so the test can tell these blocks apart. */
#define SIZE_OF(t, j) ((size_t)(3000 + (t) * 16 + (j) % 5))

static int rounds = 40, per_round = 64;
static pthread_barrier_t barrier;
static void **slots[NT];  /* slots[t]: the blocks thread t made this round */
static struct {
    long tid, mallocs, frees, bad;
} stat[NT];

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    int prev = (t + NT - 1) % NT;
    stat[t].tid = syscall(SYS_gettid);
    pthread_barrier_wait(&barrier);
    for (int r = 0; r < rounds; r++) {
        for (int j = 0; j < per_round; j++) {
            size_t n = SIZE_OF(t, j);
            unsigned char *p = malloc(n);
            if (!p) { stat[t].bad++; continue; }
            memset(p, t + 1, n);
            slots[t][j] = p;
            stat[t].mallocs++;
        }
        pthread_barrier_wait(&barrier);
        for (int j = 0; j < per_round; j++) {
            unsigned char *p = slots[prev][j];
            if (!p) continue;
            if (p[0] != prev + 1 || p[SIZE_OF(prev, j) - 1] != prev + 1) stat[t].bad++;
            free(p);
            slots[prev][j] = NULL;
            stat[t].frees++;
        }
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) rounds = atoi(argv[1]);
    if (argc > 2) per_round = atoi(argv[2]);
    /* The slot arrays are allocated before the threads start and freed after they end. */
    for (int t = 0; t < NT; t++)
        slots[t] = calloc(per_round, sizeof(void *));
    pthread_barrier_init(&barrier, NULL, NT);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NT; t++)
        free(slots[t]);
    long bad = 0;
    printf("{\"threads\":%d,\"rounds\":%d,\"per_round\":%d,\"main_tid\":%ld,\"workers\":[", NT, rounds,
           per_round, (long)syscall(SYS_gettid));
    for (int t = 0; t < NT; t++) {
        printf("%s{\"index\":%d,\"tid\":%ld,\"frees_blocks_of\":%d,\"size_min\":%zu,\"size_max\":%zu,"
               "\"mallocs\":%ld,\"frees\":%ld}",
               t ? "," : "", t, stat[t].tid, (t + NT - 1) % NT, SIZE_OF(t, 0), SIZE_OF(t, 4),
               stat[t].mallocs, stat[t].frees);
        bad += stat[t].bad;
    }
    printf("],\"bad\":%ld}\n", bad);
    return bad ? 1 : 0;
}
