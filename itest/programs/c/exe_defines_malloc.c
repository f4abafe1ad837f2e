/* exe_defines_malloc.c: an executable that defines malloc, free, calloc and realloc itself
 * (a bump allocator over a static arena), as a program linked with its own allocator does. Calls
 * to them resolve inside the executable and never reach a preloaded library; the shim must
 * say so once on stderr, and the program must run exactly as without it.
 * Prints how many of its own malloc-family calls it served and a checksum. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static _Alignas(16) unsigned char arena[32 << 20];
static size_t used;
static unsigned long served;

struct hdr { size_t size; size_t pad; };

void *malloc(size_t n) {
    size_t need = (sizeof(struct hdr) + n + 15) & ~(size_t)15;
    if (n > sizeof arena || used + need > sizeof arena) return NULL;
    struct hdr *h = (struct hdr *)(arena + used);
    used += need;
    h->size = n;
    __atomic_add_fetch(&served, 1, __ATOMIC_RELAXED);
    return h + 1;
}

void free(void *p) {
    if (p) __atomic_add_fetch(&served, 1, __ATOMIC_RELAXED);
}

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

/* Called through pointers so that gcc, which knows what malloc and free do, keeps them. */
static void *(*volatile do_malloc)(size_t) = malloc;
static void (*volatile do_free)(void *) = free;

int main(void) {
    unsigned long sum = 0;
    unsigned long before = served;
    for (int i = 0; i < 1000; i++) {
        unsigned char *p = do_malloc(16 + i);
        memset(p, i & 0xff, 16 + i);
        sum += p[i / 2];
        do_free(p);
    }
    unsigned long mine = served - before;
    printf("{\"own_calls\":%lu,\"checksum\":%lu}\n", mine, sum);
    return 0;
}
