/* slow_call.c: one allocation that stays long inside the allocator. Run with glibc's
 * MALLOC_PERTURB_ set, glibc fills every new block, so malloc(256 MiB) takes tens of ms.
 * Prints {"big":SIZE,"small":N}: SIZE is the slow call, N fast ones around it. */
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    int small = 200;
    for (int i = 0; i < small / 2; i++) {
        void *volatile p = malloc(64);
        free(p);
    }
    size_t big = (size_t)256 << 20;
    void *volatile b = malloc(big);
    if (!b) return 1;
    free(b);
    printf("{\"big\":%zu,\"small\":%d}\n", big, small);
    return 0;
}
