/* decay.c: a program that builds a heap, frees most of it, and then idles while calling
 * the allocator now and then: what an allocator's decay and purge settings act on
 * (jemalloc's dirty_decay_ms, mimalloc's purge_delay), for itest/tests/settings.rs.
 *
 * `decay [MIB] [IDLE_MS]` (default 128 MiB, 1500 ms): MIB MiB in 64 KiB blocks, each
 * written whole; frees 15 of every 16; then for IDLE_MS one small malloc and free every
 * 10 ms (an allocator that purges from within its calls gets its chance), and exits with
 * the sixteenth still live (so that a replay's end is the idle's end). Prints
 * {"rss_held":B,"rss_end":B} (resident bytes after the build-up and at the end). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long rss(void) {
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &pages, &res) != 2) {
        perror("statm");
        exit(1);
    }
    fclose(f);
    return res * sysconf(_SC_PAGESIZE);
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], 0, 10) : 128;
    long idle_ms = argc > 2 ? strtol(argv[2], 0, 10) : 1500;
    size_t n = mib * 16, sz = 64 << 10;
    char **b = malloc(n * sizeof *b);
    if (!b) return 1;
    for (size_t i = 0; i < n; i++) {
        b[i] = malloc(sz);
        if (!b[i]) return 1;
        memset(b[i], (int)i, sz);
    }
    long held = rss();
    for (size_t i = 0; i < n; i++)
        if (i % 16) free(b[i]);
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (long t = 0; t < idle_ms; t += 10) {
        nanosleep(&ts, 0);
        void *p = malloc(64);
        if (!p) return 1;
        *(volatile char *)p = 1;
        free(p);
    }
    long end = rss();
    printf("{\"rss_held\":%ld,\"rss_end\":%ld}\n", held, end);
    return 0;
}
