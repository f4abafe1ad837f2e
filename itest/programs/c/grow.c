/* Two call sites whose blocks stay live to the end, for the "sites that grew" query of
 * docs/fleets.md (itest/tests/fleets.rs): main -> keeper -> malloc makes N blocks of
 * KEEP_SIZE (N the first argument), main -> steady -> malloc makes STEADY_COUNT blocks of
 * STEADY_SIZE whatever N is; neither frees them. A run with a larger N is the same program
 * whose keeper site keeps more bytes live. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEEP_SIZE 3000
#define STEADY_COUNT 200
#define STEADY_SIZE 5000

void *volatile sink;

__attribute__((noinline)) void keeper(int n) {
    for (int i = 0; i < n; i++) {
        void *p = malloc(KEEP_SIZE);
        memset(p, 1, 16);
        sink = p;
    }
}

__attribute__((noinline)) void steady(void) {
    for (int i = 0; i < STEADY_COUNT; i++) {
        void *p = malloc(STEADY_SIZE);
        memset(p, 2, 16);
        sink = p;
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    keeper(n);
    steady();
    printf("done\n");
    return 0;
}
