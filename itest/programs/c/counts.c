/* counts.c: makes a known sequence of malloc-family calls and prints, as one JSON object on
 * stdout, exactly what it did: the count of each call and every call in order with its
 * arguments and result, so a test can find each of them in the shim's log.
 *
 * Output is built in a static buffer and written with write(2): stdio would add its own
 * malloc for the stdout buffer. Usage: counts [ROUNDS] (default 50). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum op { MALLOC, FREE, CALLOC, REALLOC, REALLOCARRAY, POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN,
          VALLOC, PVALLOC, USABLE_SIZE, NOPS };
static const char *names[NOPS] = {"malloc", "free", "calloc", "realloc", "reallocarray",
                                  "posix_memalign", "aligned_alloc", "memalign", "valloc",
                                  "pvalloc", "malloc_usable_size"};

#define MAXCALLS 20000
struct call {
    enum op op;
    size_t size, count, align;
    uintptr_t old, ptr;
    int ret;
};
static struct call calls[MAXCALLS];
static size_t ncalls;
static long counts[NOPS];
static long free_null;
static int usable_ok = 1;
static int failures;
/* NULL the compiler cannot see: gcc folds realloc(NULL, n) into malloc(n) and drops
 * free(NULL), and the point here is to make those very calls. */
static void *volatile null_ptr;

static void rec(enum op op, size_t size, size_t count, size_t align, uintptr_t old, void *ptr, int ret) {
    counts[op]++;
    if (op == USABLE_SIZE)
        return;
    if (ncalls < MAXCALLS)
        calls[ncalls++] = (struct call){op, size, count, align, old, (uintptr_t)ptr, ret};
}

/* Touches a block so no compiler can treat the allocation as unused. */
static void touch(void *p, size_t n) {
    if (p && n)
        memset(p, 0xa5, n);
}

static void *do_malloc(size_t n) {
    void *p = malloc(n);
    rec(MALLOC, n, 0, 0, 0, p, 0);
    if (!p) failures++;
    touch(p, n);
    return p;
}

static void do_free(void *p) {
    if (!p) {
        free_null++;
        free(null_ptr);
        return;
    }
    rec(FREE, 0, 0, 0, 0, p, 0);
    free(p);
}

static void check_usable(void *p, size_t n) {
    size_t u = malloc_usable_size(p);
    rec(USABLE_SIZE, n, 0, 0, 0, p, 0);
    if (u < n) usable_ok = 0;
}

static void one_round(long pagesize) {
    static const size_t msizes[] = {1, 8, 16, 24, 100, 1000, 4096, 10000, 70000, 1 << 20};
    void *blocks[16];
    int nb = 0;
    for (size_t i = 0; i < sizeof msizes / sizeof msizes[0]; i++) {
        blocks[nb] = do_malloc(msizes[i]);
        check_usable(blocks[nb], msizes[i]);
        nb++;
    }
    for (int i = 0; i < nb; i++)
        do_free(blocks[i]);

    /* calloc: count x size, contents must be zero. */
    static const size_t cc[][2] = {{1, 1}, {10, 8}, {100, 100}, {3, 5000}};
    for (size_t i = 0; i < 4; i++) {
        unsigned char *p = calloc(cc[i][0], cc[i][1]);
        rec(CALLOC, cc[i][1], cc[i][0], 0, 0, p, 0);
        if (!p) failures++;
        for (size_t k = 0; p && k < cc[i][0] * cc[i][1]; k++)
            if (p[k]) failures++;
        check_usable(p, cc[i][0] * cc[i][1]);
        do_free(p);
    }

    /* realloc: from NULL, growing through several size classes, then shrinking. */
    char *r = realloc(null_ptr, 40);
    rec(REALLOC, 40, 0, 0, 0, r, 0);
    touch(r, 40);
    size_t sz = 40;
    for (int i = 0; i < 6; i++) {
        size_t n = sz * 4;
        uintptr_t old = (uintptr_t)r;
        char *q = realloc(r, n);
        rec(REALLOC, n, 0, 0, old, q, 0);
        if (!q) { failures++; break; }
        touch(q, n);
        r = q;
        sz = n;
    }
    uintptr_t old = (uintptr_t)r;
    char *q = realloc(r, 50);
    rec(REALLOC, 50, 0, 0, old, q, 0);
    check_usable(q, 50);
    do_free(q);

    /* reallocarray: from NULL, then growing. */
    int *a = reallocarray(null_ptr, 10, sizeof(int));
    rec(REALLOCARRAY, sizeof(int), 10, 0, 0, a, 0);
    touch(a, 10 * sizeof(int));
    old = (uintptr_t)a;
    int *b = reallocarray(a, 1000, sizeof(int));
    rec(REALLOCARRAY, sizeof(int), 1000, 0, old, b, 0);
    touch(b, 1000 * sizeof(int));
    do_free(b);

    /* posix_memalign: the return code is part of the record. */
    static const size_t pm[][2] = {{16, 100}, {64, 1000}, {4096, 5000}, {65536, 100}};
    for (size_t i = 0; i < 4; i++) {
        void *p = NULL;
        int ret = posix_memalign(&p, pm[i][0], pm[i][1]);
        rec(POSIX_MEMALIGN, pm[i][1], 0, pm[i][0], 0, p, ret);
        if (ret || ((uintptr_t)p % pm[i][0])) failures++;
        touch(p, pm[i][1]);
        check_usable(p, pm[i][1]);
        do_free(p);
    }

    static const size_t aa[][2] = {{16, 32}, {64, 640}, {4096, 8192}};
    for (size_t i = 0; i < 3; i++) {
        void *p = aligned_alloc(aa[i][0], aa[i][1]);
        rec(ALIGNED_ALLOC, aa[i][1], 0, aa[i][0], 0, p, 0);
        if (!p || ((uintptr_t)p % aa[i][0])) failures++;
        touch(p, aa[i][1]);
        do_free(p);
    }

    static const size_t ma[][2] = {{32, 100}, {256, 1000}, {8192, 20000}};
    for (size_t i = 0; i < 3; i++) {
        void *p = memalign(ma[i][0], ma[i][1]);
        rec(MEMALIGN, ma[i][1], 0, ma[i][0], 0, p, 0);
        if (!p || ((uintptr_t)p % ma[i][0])) failures++;
        touch(p, ma[i][1]);
        do_free(p);
    }

    static const size_t vs[] = {100, 5000};
    for (size_t i = 0; i < 2; i++) {
        void *p = valloc(vs[i]);
        rec(VALLOC, vs[i], 0, 0, 0, p, 0);
        if (!p || ((uintptr_t)p % pagesize)) failures++;
        touch(p, vs[i]);
        do_free(p);
        p = pvalloc(vs[i]);
        rec(PVALLOC, vs[i], 0, 0, 0, p, 0);
        if (!p || ((uintptr_t)p % pagesize)) failures++;
        check_usable(p, (vs[i] + pagesize - 1) / pagesize * pagesize);
        touch(p, vs[i]);
        do_free(p);
    }

    /* free(NULL) is a no-op; it is counted apart from the frees of real blocks. */
    do_free(NULL);
}

static char out[4 << 20];
static size_t outlen;
#define EMIT(...) (outlen += snprintf(out + outlen, sizeof out - outlen, __VA_ARGS__))

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 50;
    long pagesize = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < rounds; i++)
        one_round(pagesize);

    EMIT("{\"pid\":%d,\"rounds\":%d,\"failures\":%d,\"usable_ok\":%s,\"free_null\":%ld,\"counts\":{",
         (int)getpid(), rounds, failures, usable_ok ? "true" : "false", free_null);
    for (int i = 0; i < NOPS; i++)
        EMIT("%s\"%s\":%ld", i ? "," : "", names[i], counts[i]);
    EMIT("},\"calls\":[");
    for (size_t i = 0; i < ncalls; i++) {
        struct call *c = &calls[i];
        EMIT("%s{\"op\":\"%s\",\"size\":%zu,\"count\":%zu,\"align\":%zu,\"old\":%lu,\"ptr\":%lu,\"ret\":%d}",
             i ? "," : "", names[c->op], c->size, c->count, c->align, (unsigned long)c->old,
             (unsigned long)c->ptr, c->ret);
    }
    EMIT("]}\n");
    if (outlen >= sizeof out) return 2;
    for (size_t off = 0; off < outlen;) {
        ssize_t n = write(1, out + off, outlen - off);
        if (n <= 0) return 3;
        off += n;
    }
    return failures ? 1 : 0;
}
