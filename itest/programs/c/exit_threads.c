/* exit_threads.c: the main thread makes 10 blocks of 8001 bytes (and frees 4 of them),
 * starts 4 threads that malloc/free in a loop forever, waits a few milliseconds, prints one
 * JSON line and ends while the threads are still allocating:
 *   exit_threads return   returns from main
 *   exit_threads exit     calls exit(0)
 *   exit_threads kill     every thread allocates about once a millisecond; the main
 *                         thread goes on for 1.5 s (its partial buffer must have been
 *                         written by then), then SIGKILLs itself
 * The log must decode and hold the main thread's known calls. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NT 4
static volatile int started;
static int slow; /* kill mode: everyone allocates about once a millisecond */

static void *spin(void *arg) {
    unsigned x = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    void *keep[32] = {0};
    __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
    for (;;) {
        x = x * 1103515245u + 12345u;
        int k = (x >> 8) % 32;
        free(keep[k]);
        keep[k] = malloc(8100 + (x >> 16) % 200);
        if (keep[k]) memset(keep[k], 1, 8);
        if (slow) usleep(1000);
    }
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "return";
    void *v[10];
    slow = strcmp(mode, "kill") == 0;
    for (int i = 0; i < 10; i++) {
        v[i] = malloc(8001);
        memset(v[i], 2, 8001);
    }
    for (int i = 0; i < 4; i++)
        free(v[i]);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, spin, (void *)(intptr_t)(t + 1));
    while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < NT)
        usleep(100);
    usleep(20000);
    char line[256];
    int len = snprintf(line, sizeof line,
                       "{\"mode\":\"%s\",\"pid\":%d,\"main_tid\":%ld,\"size\":8001,\"mallocs\":10,"
                       "\"frees\":4,\"threads\":%d}\n",
                       mode, (int)getpid(), (long)syscall(SYS_gettid), NT);
    if (write(1, line, len) != len) return 3;
    if (strcmp(mode, "exit") == 0)
        exit(0);
    if (strcmp(mode, "kill") == 0) {
        double end = now() + 1.5;
        while (now() < end) {
            /* volatile: gcc would drop a malloc/memset/free it can see through */
            char *volatile p = malloc(8002);
            if (p) memset(p, 3, 8);
            free(p);
            usleep(1000);
        }
        raise(SIGKILL);
    }
    return 0;
}
