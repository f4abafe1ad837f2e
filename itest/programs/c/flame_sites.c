/* Two call sites whose bytes are set by the arguments, for the differential flame graph
 * tests (itest/tests/compare_flame.rs): main -> grow makes GROW_KIB KiB in 4 KiB blocks,
 * main -> shrink SHRINK_KIB KiB, and main -> steady 1 MiB every run; all are live at once
 * (the heap's peak), then freed after SLEEP_MS (default 0: a longer run, same calls).
 * Usage: flame_sites GROW_KIB SHRINK_KIB [SLEEP_MS]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 4096
#define MAX_BLOCKS 65536

static void *keep[MAX_BLOCKS];
static int kept;

static void hold(void *p) {
    if (!p || kept == MAX_BLOCKS) {
        fprintf(stderr, "flame_sites: out of memory or blocks\n");
        exit(1);
    }
    memset(p, 1, 16);
    keep[kept++] = p;
}

__attribute__((noinline)) void grow(long kib) {
    for (long i = 0; i < kib / 4; i++) hold(malloc(BLOCK));
}

__attribute__((noinline)) void shrink(long kib) {
    for (long i = 0; i < kib / 4; i++) hold(malloc(BLOCK));
}

__attribute__((noinline)) void steady(void) {
    for (long i = 0; i < 256; i++) hold(malloc(BLOCK));
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: flame_sites GROW_KIB SHRINK_KIB [SLEEP_MS]\n");
        return 2;
    }
    grow(atol(argv[1]));
    shrink(atol(argv[2]));
    steady();
    if (argc == 4) {
        long ms = atol(argv[3]);
        struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
    for (int i = 0; i < kept; i++) free(keep[i]);
    /* write, not printf: stdout's buffer would be a block never freed. */
    if (write(1, "done\n", 5) != 5) return 1;
    return 0;
}
