/* introspect.c: allocates 16 MiB in 64 KiB blocks, then asks the heap about it with
 * mallinfo2 and malloc_trim. Prints {"in_use":BYTES,"trim":RC,"mallinfo_in_use":BYTES}.
 * Under the shim the answers must come from the backend serving the calls. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    enum { N = 256, SZ = 64 << 10 };
    static void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(SZ);
        memset(blocks[i], 1, SZ);
    }
    struct mallinfo2 m2 = mallinfo2();
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo m1 = mallinfo();
    for (int i = 0; i < N; i++) free(blocks[i]);
    int rc = malloc_trim(0);
    printf("{\"in_use\":%zu,\"trim\":%d,\"mallinfo_in_use\":%d}\n", m2.uordblks, rc, m1.uordblks);
    return 0;
}
