/* semantics.c: the return values and errno of the malloc family's edge cases, one line per
 * case, never a raw pointer value. Its output without the shim must equal its output under
 * the shim with every backend (the shim gives each call the semantics glibc gives it).
 *
 * errno is set to a sentinel before each call, so "errno=unchanged" means the call left it
 * alone. Sizes and alignments live in volatile variables so the compiler cannot reason
 * about the calls. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A failed realloc leaves the old block valid: reading it afterwards is the point. */
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wuse-after-free"

#define SENTINEL 4242
static volatile size_t HUGE_SZ = SIZE_MAX;
static volatile size_t HALF = SIZE_MAX / 2;
static volatile size_t BIG = (size_t)1 << 62;
static volatile size_t TOP_ALIGN = SIZE_MAX / 2 + 1; /* 2^63 */
static size_t page;
/* NULL the compiler cannot see: gcc folds realloc(NULL, n) into malloc(n) and drops
 * free(NULL). */
static void *volatile NUL;

static const char *errname(int e) {
    static char buf[32];
    switch (e) {
    case SENTINEL: return "unchanged";
    case 0: return "0";
    case ENOMEM: return "ENOMEM";
    case EINVAL: return "EINVAL";
    default: snprintf(buf, sizeof buf, "%d", e); return buf;
    }
}

static size_t pow2_at_least(size_t a) {
    size_t p = 1;
    while (p < a && p) p <<= 1;
    return p;
}

/* Prints one allocation's outcome: null or not, errno, alignment to `align` (rounded up to
 * a power of two, as glibc does) and whether the usable size covers `want`; frees it. */
static void report(const char *what, void *p, int err, size_t align, size_t want) {
    printf("%-44s ret=%s errno=%s", what, p ? "ok" : "null", errname(err));
    if (p) {
        if (align > 1)
            printf(" aligned=%s", (uintptr_t)p % pow2_at_least(align) == 0 ? "yes" : "no");
        printf(" usable>=%zu:%s", want, malloc_usable_size(p) >= want ? "yes" : "no");
        if (want) memset(p, 0x77, want);
        errno = SENTINEL;
        free(p);
        if (errno != SENTINEL) printf(" free-changed-errno=%s", errname(errno));
    }
    printf("\n");
}

#define CALL(what, expr, align, want)              \
    do {                                           \
        errno = SENTINEL;                          \
        void *p_ = (expr);                         \
        int e_ = errno;                            \
        report(what, p_, e_, align, want);         \
    } while (0)

static void pm(const char *what, size_t align, size_t size) {
    void *sentinel_ptr = &page;
    void *p = sentinel_ptr;
    errno = SENTINEL;
    int rc = posix_memalign(&p, align, size);
    int e = errno;
    printf("%-44s rc=%s errno=%s memptr=%s", what, errname(rc), errname(e),
           p == sentinel_ptr ? "untouched" : p ? "set" : "null");
    if (rc == 0 && p != sentinel_ptr && p) {
        printf(" aligned=%s usable>=%zu:%s", (uintptr_t)p % align == 0 ? "yes" : "no", size,
               malloc_usable_size(p) >= size ? "yes" : "no");
        if (size) memset(p, 0x66, size);
        free(p);
    }
    printf("\n");
}

static int all(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

int main(void) {
    page = sysconf(_SC_PAGESIZE);
    char name[64];

    printf("== malloc\n");
    CALL("malloc(0)", malloc(0), 0, 0);
    /* A 1-byte block need not be 16-aligned (jemalloc and mimalloc give 8): not checked. */
    CALL("malloc(1)", malloc(1), 0, 1);
    CALL("malloc(100)", malloc(100), 16, 100);
    CALL("malloc(1<<20)", malloc(1 << 20), 16, 1 << 20);
    CALL("malloc(SIZE_MAX)", malloc(HUGE_SZ), 0, 0);
    CALL("malloc(SIZE_MAX/2)", malloc(HALF), 0, 0);
    CALL("malloc(1<<62)", malloc(BIG), 0, 0);

    printf("== calloc\n");
    CALL("calloc(0,0)", calloc(0, 0), 0, 0);
    CALL("calloc(0,SIZE_MAX)", calloc(0, HUGE_SZ), 0, 0);
    CALL("calloc(10,10)", calloc(10, 10), 16, 100);
    CALL("calloc(SIZE_MAX/2,3) overflow", calloc(HALF, 3), 0, 0);
    CALL("calloc(3,SIZE_MAX/2) overflow", calloc(3, HALF), 0, 0);
    CALL("calloc(1<<62,1)", calloc(BIG, 1), 0, 0);
    {
        /* calloc must zero memory that a previous block dirtied. */
        int zero_ok = 1;
        for (int i = 0; i < 20; i++) {
            size_t n = 64 << (i % 12);
            unsigned char *d = malloc(n);
            memset(d, 0xff, n);
            free(d);
            unsigned char *z = calloc(n / 8, 8);
            if (!z || !all(z, n, 0)) zero_ok = 0;
            free(z);
        }
        printf("%-44s %s\n", "calloc zeroes reused memory", zero_ok ? "yes" : "no");
    }

    printf("== realloc\n");
    CALL("realloc(NULL,0)", realloc(NUL, 0), 0, 0);
    CALL("realloc(NULL,100)", realloc(NUL, 100), 16, 100);
    {
        unsigned char *p = malloc(100);
        memset(p, 0x11, 100);
        errno = SENTINEL;
        void *q = realloc(p, 0);
        printf("%-44s ret=%s errno=%s\n", "realloc(p,0)", q ? "ok" : "null", errname(errno));
        free(q);

        p = malloc(100);
        memset(p, 0x22, 100);
        errno = SENTINEL;
        q = realloc(p, HUGE_SZ);
        printf("%-44s ret=%s errno=%s old-intact=%s\n", "realloc(p,SIZE_MAX)", q ? "ok" : "null",
               errname(errno), all(p, 100, 0x22) ? "yes" : "no");
        if (q) p = q;
        errno = SENTINEL;
        q = realloc(p, BIG);
        printf("%-44s ret=%s errno=%s old-intact=%s\n", "realloc(p,1<<62)", q ? "ok" : "null",
               errname(errno), all(p, 100, 0x22) ? "yes" : "no");
        if (q) p = q;
        errno = SENTINEL;
        q = realloc(p, 100000);
        int e = errno;
        printf("%-44s ret=%s errno=%s contents-kept=%s\n", "realloc(p,100000) grow", q ? "ok" : "null",
               errname(e), q && all(q, 100, 0x22) ? "yes" : "no");
        memset(q, 0x33, 100000);
        p = realloc(q, 10);
        printf("%-44s ret=%s contents-kept=%s\n", "realloc(p,10) shrink", p ? "ok" : "null",
               p && all(p, 10, 0x33) ? "yes" : "no");
        free(p);
    }

    printf("== reallocarray\n");
    CALL("reallocarray(NULL,10,10)", reallocarray(NUL, 10, 10), 16, 100);
    CALL("reallocarray(NULL,SIZE_MAX/2,3) overflow", reallocarray(NUL, HALF, 3), 0, 0);
    {
        unsigned char *p = malloc(50);
        memset(p, 0x44, 50);
        errno = SENTINEL;
        void *q = reallocarray(p, HALF, 3);
        printf("%-44s ret=%s errno=%s old-intact=%s\n", "reallocarray(p,SIZE_MAX/2,3) overflow",
               q ? "ok" : "null", errname(errno), all(p, 50, 0x44) ? "yes" : "no");
        if (q) p = q;
        errno = SENTINEL;
        q = reallocarray(p, 100, 100);
        printf("%-44s ret=%s errno=%s contents-kept=%s\n", "reallocarray(p,100,100) grow",
               q ? "ok" : "null", errname(errno), q && all(q, 50, 0x44) ? "yes" : "no");
        if (q) p = q;
        errno = SENTINEL;
        q = reallocarray(p, 0, 10);
        printf("%-44s ret=%s errno=%s\n", "reallocarray(p,0,10)", q ? "ok" : "null", errname(errno));
        free(q);
    }

    printf("== posix_memalign\n");
    static const size_t aligns[] = {0, 1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64, 4096, 1 << 16, 1 << 20};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        snprintf(name, sizeof name, "posix_memalign(%zu,100)", aligns[i]);
        pm(name, aligns[i], 100);
    }
    pm("posix_memalign(sizeof(void*)*2,0)", sizeof(void *) * 2, 0);
    pm("posix_memalign(16,1)", 16, 1);
    pm("posix_memalign(16,8)", 16, 8);
    pm("posix_memalign(16,SIZE_MAX)", 16, HUGE_SZ);
    pm("posix_memalign(4096,1<<62)", 4096, BIG);
    pm("posix_memalign(2^63,16)", TOP_ALIGN, 16);
    pm("posix_memalign(SIZE_MAX,16)", HUGE_SZ, 16);

    printf("== aligned_alloc\n");
    static const size_t aa[][2] = {{0, 100}, {1, 100}, {3, 100}, {8, 64}, {16, 100}, {24, 96},
                                   {64, 64}, {64, 100}, {4096, 4096}, {4096, 100}, {1 << 20, 1 << 20},
                                   {16, 0}, {16, 8}};
    for (size_t i = 0; i < sizeof aa / sizeof aa[0]; i++) {
        snprintf(name, sizeof name, "aligned_alloc(%zu,%zu)", aa[i][0], aa[i][1]);
        CALL(name, aligned_alloc(aa[i][0], aa[i][1]), aa[i][0], aa[i][1]);
    }
    CALL("aligned_alloc(16,SIZE_MAX)", aligned_alloc(16, HUGE_SZ), 0, 0);
    CALL("aligned_alloc(SIZE_MAX,16)", aligned_alloc(HUGE_SZ, 16), 0, 0);

    printf("== memalign\n");
    static const size_t ma[] = {0, 1, 3, 8, 16, 24, 48, 64, 100, 4096, 1 << 20};
    for (size_t i = 0; i < sizeof ma / sizeof ma[0]; i++) {
        snprintf(name, sizeof name, "memalign(%zu,100)", ma[i]);
        CALL(name, memalign(ma[i], 100), ma[i], 100);
    }
    CALL("memalign(16,0)", memalign(16, 0), 16, 0);
    CALL("memalign(16,8)", memalign(16, 8), 16, 8);
    CALL("memalign(32,8)", memalign(32, 8), 32, 8);
    CALL("memalign(16,SIZE_MAX)", memalign(16, HUGE_SZ), 0, 0);
    CALL("memalign(2^63,16)", memalign(TOP_ALIGN, 16), 0, 0);
    CALL("memalign(SIZE_MAX,16)", memalign(HUGE_SZ, 16), 0, 0);

    printf("== valloc / pvalloc\n");
    CALL("valloc(0)", valloc(0), page, 0);
    CALL("valloc(100)", valloc(100), page, 100);
    CALL("valloc(page+1)", valloc(page + 1), page, page + 1);
    CALL("valloc(SIZE_MAX)", valloc(HUGE_SZ), 0, 0);
    CALL("pvalloc(0)", pvalloc(0), page, 0);
    CALL("pvalloc(100) covers a page", pvalloc(100), page, page);
    CALL("pvalloc(page+1) covers two pages", pvalloc(page + 1), page, 2 * page);
    CALL("pvalloc(SIZE_MAX)", pvalloc(HUGE_SZ), 0, 0);

    printf("== malloc_usable_size / free\n");
    errno = SENTINEL;
    printf("%-44s %zu errno=%s\n", "malloc_usable_size(NULL)", malloc_usable_size(NUL), errname(errno));
    {
        void *p = malloc(1000);
        printf("%-44s %s\n", "malloc_usable_size(malloc(1000))>=1000", malloc_usable_size(p) >= 1000 ? "yes" : "no");
        errno = SENTINEL;
        free(p);
        printf("%-44s errno=%s\n", "free(p)", errname(errno));
        errno = SENTINEL;
        free(NUL);
        printf("%-44s errno=%s\n", "free(NULL)", errname(errno));
        errno = SENTINEL;
        p = malloc(64);
        printf("%-44s errno=%s\n", "successful malloc(64)", errname(errno));
        free(p);
        errno = SENTINEL;
        p = calloc(8, 8);
        printf("%-44s errno=%s\n", "successful calloc(8,8)", errname(errno));
        errno = SENTINEL;
        p = realloc(p, 4000);
        printf("%-44s errno=%s\n", "successful realloc(p,4000)", errname(errno));
        free(p);
    }
    return 0;
}
