/* The unwinding cost (bench/stacks.py): recurse DEPTH frames deep through a function built
 * with frame pointers, then make N malloc/free pairs of 64 bytes there. Under
 * SHIM_STACKS=all each malloc takes its stack (the same one each time: unwinding, the
 * table lookup and the site record; the definition is written once).
 * Usage: stack_depth DEPTH N */
#include <stdio.h>
#include <stdlib.h>

void *volatile sink;

void *volatile escape;

__attribute__((noinline)) static long down(int depth, long n) {
    if (depth > 0) {
        /* A local whose address escapes: the call cannot become a loop or a jump. */
        long r = down(depth - 1, n);
        escape = &r;
        return r + 1;
    }
    for (long i = 0; i < n; i++) {
        void *p = malloc(64);
        sink = p;
        free(p);
    }
    return 0;
}

int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 16;
    long n = argc > 2 ? atol(argv[2]) : 100000;
    long r = down(depth, n);
    printf("stack_depth: depth=%d calls=%ld r=%ld\n", depth, n, r);
    return 0;
}
