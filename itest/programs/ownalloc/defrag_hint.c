/* defrag_hint.c: a program with jemalloc renamed je_* (as Redis and Valkey link it) and
 * their jemalloc's extension je_get_defrag_hint(ptr), which active defragmentation asks
 * whether a block should move (Redis' src/defrag.c: `if (!je_get_defrag_hint(ptr)) miss;
 * else move it with je_mallocx(size, MALLOCX_TCACHE_NONE)`).
 *
 * Debian's jemalloc has no get_defrag_hint: it is defined here, deciding as Redis'
 * iget_defrag_hint does (a block in a slab with free regions, used less than its bin's
 * average, should move), from experimental.utilization.query. It counts its calls, so that
 * a run shows whether the program's own function answered (own mode) or the shim did
 * (switched: every block stays, the function is never called).
 *
 * Built by itest/programs/ownalloc/build.sh as c_je_defrag (with libjemalloc_je.a, -rdynamic).
 * Prints one JSON line: {"blocks":N,"move":M,"own_hint_calls":C}
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *je_malloc(size_t);
void je_free(void *);
void *je_mallocx(size_t, int);
void je_sdallocx(void *, size_t, int);
int je_mallctl(const char *, void *, size_t *, void *, size_t);

static volatile long own_hint_calls;

__attribute__((noinline)) int je_get_defrag_hint(void *ptr) {
    own_hint_calls++;
    /* slabcur, nfree, nregs, size, bin_nfree, bin_nregs */
    struct {
        void *slabcur;
        size_t nfree, nregs, size, bin_nfree, bin_nregs;
    } u;
    size_t len = sizeof(u);
    if (je_mallctl("experimental.utilization.query", &u, &len, &ptr, sizeof(ptr)) != 0) return 0;
    if (u.nfree == 0 || u.nregs == 0 || u.bin_nregs == 0) return 0;
    /* used/nregs < bin_used/bin_nregs, multiplied out */
    size_t used = u.nregs - u.nfree, bin_used = u.bin_nregs - u.bin_nfree;
    return used * u.bin_nregs < bin_used * u.nregs;
}

int main(void) {
    enum { N = 20000 };
    static void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = je_malloc(48 + (i % 4) * 16);
        memset(blocks[i], 7, 48);
    }
    /* Free most blocks unevenly, leaving slabs at different fill levels. */
    for (int i = 0; i < N; i++)
        if (i % 7 != 0 && (i / 512) % 3 != 0) {
            je_free(blocks[i]);
            blocks[i] = NULL;
        }
    long n = 0, move = 0;
    for (int i = 0; i < N; i++) {
        if (!blocks[i]) continue;
        n++;
        if (je_get_defrag_hint(blocks[i])) {
            /* As Redis moves a block: a new one without the thread cache, the old freed. */
            void *p = je_mallocx(48, 1 << 8 /* MALLOCX_TCACHE_NONE */);
            memcpy(p, blocks[i], 48);
            je_free(blocks[i]);
            blocks[i] = p;
            move++;
        }
    }
    for (int i = 0; i < N; i++)
        if (blocks[i]) je_free(blocks[i]);
    printf("{\"blocks\":%ld,\"move\":%ld,\"own_hint_calls\":%ld}\n", n, move, own_hint_calls);
    return 0;
}
