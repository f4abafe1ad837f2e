/* unpatchable.c: an executable with its own allocator (a bump allocator over a static arena)
 * whose `free` does nothing: built with -O2 -fcf-protection=none it is a single `ret`
 * instruction, one byte, too short to hold a jump. The shim cannot patch this allocator;
 * it must leave all of it alone (recording none of its calls rather than half of them),
 * say so in exactly one line on stderr, and the program must print exactly what it prints
 * without the shim.
 * Usage: unpatchable [ITERATIONS] (default 1000). Prints
 *   {"own_calls":N,"checksum":N}
 * own_calls = the calls its malloc, calloc and realloc served during the iterations. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Alignas(16) unsigned char arena[64 << 20];
static size_t used;
static unsigned long served;

struct hdr { size_t size; size_t pad; };

void *malloc(size_t n) {
    size_t need = (sizeof(struct hdr) + n + 15) & ~(size_t)15;
    size_t at = __atomic_fetch_add(&used, need, __ATOMIC_RELAXED);
    if (n > sizeof arena || at + need > sizeof arena) return NULL;
    struct hdr *h = (struct hdr *)(arena + at);
    h->size = n;
    __atomic_add_fetch(&served, 1, __ATOMIC_RELAXED);
    return h + 1;
}

/* A bump allocator frees nothing: one `ret`. */
void free(void *p) { (void)p; }

void *calloc(size_t c, size_t n) {
    if (n && c > SIZE_MAX / n) return NULL;
    void *p = malloc(c * n);
    if (p) memset(p, 0, c * n);
    return p;
}

void *realloc(void *old, size_t n) {
    void *p = malloc(n);
    if (p && old) {
        size_t was = ((struct hdr *)old - 1)->size;
        memcpy(p, old, was < n ? was : n);
    }
    return p;
}

size_t malloc_usable_size(void *p) { return p ? ((struct hdr *)p - 1)->size : 0; }

/* Called through pointers so that gcc, which knows what malloc and free do, keeps them. */
static void *(*volatile do_malloc)(size_t) = malloc;
static void *(*volatile do_calloc)(size_t, size_t) = calloc;
static void *(*volatile do_realloc)(void *, size_t) = realloc;
static void (*volatile do_free)(void *) = free;

int main(int argc, char **argv) {
    unsigned long iters = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
    unsigned long sum = 0;
    unsigned long before = served;
    for (unsigned long i = 0; i < iters; i++) {
        size_t n = 16 + i % 500;
        unsigned char *p = do_malloc(n);
        memset(p, (int)(i & 0xff), n);
        unsigned char *z = do_calloc(4, 8);
        p = do_realloc(p, 2 * n);
        sum += p[i % n] + z[i % 32];
        do_free(z);
        do_free(p);
    }
    unsigned long mine = served - before;
    printf("{\"own_calls\":%lu,\"checksum\":%lu}\n", mine, sum);
    return 0;
}
