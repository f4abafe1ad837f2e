/* windows.c: allocates for SECONDS (argument, default 5) on the main thread, in batches of
 * 100 malloc/free pairs about every millisecond, and prints each batch's CLOCK_MONOTONIC
 * time (ns, taken after the batch) as {"batch":100,"times":[...]} so that a test can count
 * the calls of any period. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 5;
    long long end = now_ns() + (long long)(secs * 1e9);
    size_t cap = 1 << 16, n = 0;
    long long *times = malloc(cap * sizeof *times);
    if (!times) return 1;
    while (now_ns() < end && n < cap) {
        for (int i = 0; i < 100; i++) {
            void *volatile p = malloc(32 + i);
            free(p);
        }
        times[n++] = now_ns();
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, 0);
    }
    printf("{\"batch\":100,\"times\":[");
    for (size_t i = 0; i < n; i++) printf(i ? ",%lld" : "%lld", times[i]);
    printf("]}\n");
    free(times);
    return 0;
}
