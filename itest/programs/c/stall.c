/* stall.c: one call that stays long inside the allocator on purpose: a 256 MiB block,
 * touched, grown to 768 MiB (a backend that cannot grow it in place copies it). Waits
 * 300 ms before and after, so that the shim's recorder is up and sees the call end.
 * Prints {"tid":TID}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

int main(void) {
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, 0);
    size_t big = (size_t)256 << 20;
    char *volatile p = malloc(big);
    if (!p) return 1;
    memset(p, 1, big);
    /* Something after it, so that it cannot grow in place. */
    void *volatile q = malloc(big);
    char *volatile r = realloc(p, 3 * big);
    if (!r) return 1;
    r[3 * big - 1] = 2;
    free(r);
    free(q);
    nanosleep(&ts, 0);
    printf("{\"tid\":%ld}\n", (long)syscall(SYS_gettid));
    return 0;
}
