/* Known call sites for the stacks tests (itest/tests/stacks.rs): main -> a -> b -> malloc
 * makes B_COUNT blocks of B_SIZE (all live at the peak, then freed), main -> c -> malloc
 * makes C_COUNT blocks of C_SIZE (never freed), and main -> slow_free frees a large block
 * whose pages it touched (the munmap takes milliseconds: a slow call). Build with
 * -fno-inline -fno-optimize-sibling-calls so that each function keeps its frame. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B_COUNT 1000
#define B_SIZE 4096
#define C_COUNT 500
#define C_SIZE 10000
#define SLOW_SIZE (256u << 20)

static void *keep[B_COUNT];
void *volatile sink;

__attribute__((noinline)) void *b(size_t n) {
    void *p = malloc(n);
    memset(p, 1, 16);
    return p;
}

__attribute__((noinline)) void a(void) {
    for (int i = 0; i < B_COUNT; i++) keep[i] = b(B_SIZE);
}

__attribute__((noinline)) void c(void) {
    for (int i = 0; i < C_COUNT; i++) {
        void *p = malloc(C_SIZE);
        memset(p, 2, 16);
        sink = p;
    }
}

__attribute__((noinline)) void slow_free(void) {
    volatile char *p = malloc(SLOW_SIZE);
    /* Every page touched (a memset before free would be optimised away). */
    for (size_t i = 0; i < SLOW_SIZE; i += 4096) p[i] = 3;
    sink = (void *)p;
    free((void *)p);
}

int main(int argc, char **argv) {
    a();
    c();
    for (int i = 0; i < B_COUNT; i++) free(keep[i]);
    if (argc > 1 && strcmp(argv[1], "slow") == 0) slow_free();
    printf("done\n");
    return 0;
}
