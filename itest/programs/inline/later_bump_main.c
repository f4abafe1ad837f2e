#include <stdio.h>
#include <stdlib.h>
static void *(*volatile do_malloc)(size_t) = malloc;
static void (*volatile do_free)(void *) = free;
int main(void) {
    unsigned long n = 0;
    for (int i = 0; i < 1000; i++) { char *p = do_malloc(32 + i); p[0] = 1; n += p[0]; do_free(p); }
    printf("work %lu\n", n);
    return 0;
}
