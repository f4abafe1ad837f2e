/* jemalloc_prog.c: a C program that brings its own jemalloc, statically linked.
 *
 * Built three ways by itest/programs/ownalloc/build.sh:
 *   c_static_jemalloc       Debian's libjemalloc.a: malloc, free, ..., mallocx, sdallocx, ...
 *                           defined in the executable (the standard ones exported, so the C
 *                           library's own calls land there too).
 *   c_je_prefix             the same archive with its public symbols renamed je_malloc,
 *                           je_free, ... (as Redis and Valkey build jemalloc): the program
 *                           calls je_* directly, and plain malloc/free too, which are the
 *                           C library's (or a preloaded shim's).
 *   c_static_jemalloc_ctor  c_static_jemalloc linked with libctorblock.so, whose constructor
 *                           allocated two blocks (with this executable's malloc) before main
 *                           and before any preloaded library's constructor: main checks them,
 *                           grows one with realloc and frees both.
 *
 * Usage: PROG [ITERATIONS] (default 1000). Each iteration calls the allocator's API in a fixed
 * sequence; the program counts every call it makes and prints
 *   checksum ITERATIONS HEX
 *   {"allocs":N,"frees":N,"reallocs":N,"free_sized":N,"not_recorded":N,"calls":{...}}
 * allocs = calls that return a new block (malloc, calloc, posix_memalign, aligned_alloc,
 * memalign, mallocx); frees = calls that release one (free, dallocx, sdallocx; never
 * free(NULL), which it also calls, uncounted); reallocs = realloc and rallocx;
 * free_sized = the sdallocx calls among the frees; not_recorded = malloc_usable_size,
 * nallocx and mallctl calls. "calls" has each function's count, and "ops" what each call
 * should appear as in a log (the mapping of issue #18). The calls made before main (the
 * C library's, libctorblock's) are not counted: compare a run with 0 iterations.
 * Nothing printed depends on which allocator serves the calls: a shim that switches them to
 * another allocator (SHIM_BACKEND) must leave the output as it is. mallctl("version") and
 * nallocx, which describe an allocator rather than serve a block, may fail then (a shim can
 * answer them for glibc with an error); the program goes on. With `-v` as the first
 * argument, the version mallctl gives goes to stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef JE_PREFIX
#define J(name) je_##name
#define PFX "je_"
#else
#define J(name) name
#define PFX ""
#endif

/* jemalloc's API, declared here rather than from <jemalloc/jemalloc.h> (whose macros depend
 * on how the library was configured). */
void *J(malloc)(size_t);
void *J(calloc)(size_t, size_t);
void *J(realloc)(void *, size_t);
void J(free)(void *);
int J(posix_memalign)(void **, size_t, size_t);
void *J(aligned_alloc)(size_t, size_t);
void *J(memalign)(size_t, size_t);
size_t J(malloc_usable_size)(void *);
void *J(mallocx)(size_t, int);
void *J(rallocx)(void *, size_t, int);
void J(dallocx)(void *, int);
void J(sdallocx)(void *, size_t, int);
size_t J(nallocx)(size_t, int);
int J(mallctl)(const char *, void *, size_t *, void *, size_t);

#define MALLOCX_LG_ALIGN(la) ((int)(la))
#define MALLOCX_ALIGN(a) ((int)(__builtin_ffsl((long)(a)) - 1))
#define MALLOCX_ZERO ((int)0x40)

#ifdef CTORBLOCK
/* libctorblock.so */
void *ctorblock_get(int which);
size_t ctorblock_size(int which);
#endif

enum {
    C_MALLOC, C_CALLOC, C_REALLOC, C_FREE, C_FREE_NULL, C_POSIX_MEMALIGN, C_ALIGNED_ALLOC,
    C_MEMALIGN, C_USABLE, C_MALLOCX, C_MALLOCX_ZERO, C_MALLOCX_ALIGN, C_MALLOCX_ALIGN_ZERO,
    C_RALLOCX, C_DALLOCX, C_SDALLOCX, C_NALLOCX, C_MALLCTL, C_LIBC_MALLOC, C_LIBC_FREE,
    C_CTOR_REALLOC, C_CTOR_FREE, NCALLS
};
static const char *const call_names[NCALLS] = {
    PFX "malloc", PFX "calloc", PFX "realloc", PFX "free", PFX "free(NULL)",
    PFX "posix_memalign", PFX "aligned_alloc", PFX "memalign", PFX "malloc_usable_size",
    PFX "mallocx", PFX "mallocx(ZERO)", PFX "mallocx(ALIGN)", PFX "mallocx(ALIGN|ZERO)",
    PFX "rallocx", PFX "dallocx", PFX "sdallocx", PFX "nallocx", PFX "mallctl",
    "libc malloc", "libc free", "realloc(ctor block)", "free(ctor block)",
};
static unsigned long calls[NCALLS];

/* What each call is in the log (issue #18): index into log_ops. */
enum { O_MALLOC, O_CALLOC, O_REALLOC, O_FREE, O_FREE_SIZED, O_POSIX_MEMALIGN, O_ALIGNED_ALLOC,
       O_MEMALIGN, NOPS };
static const char *const op_names[NOPS] = {"malloc", "calloc", "realloc", "free", "free_sized",
                                           "posix_memalign", "aligned_alloc", "memalign"};
static const int call_op[NCALLS] = {
    [C_MALLOC] = O_MALLOC, [C_CALLOC] = O_CALLOC, [C_REALLOC] = O_REALLOC, [C_FREE] = O_FREE,
    [C_FREE_NULL] = -1, [C_POSIX_MEMALIGN] = O_POSIX_MEMALIGN,
    [C_ALIGNED_ALLOC] = O_ALIGNED_ALLOC, [C_MEMALIGN] = O_MEMALIGN, [C_USABLE] = -1,
    [C_MALLOCX] = O_MALLOC, [C_MALLOCX_ZERO] = O_CALLOC, [C_MALLOCX_ALIGN] = O_MEMALIGN,
    [C_MALLOCX_ALIGN_ZERO] = O_MEMALIGN, [C_RALLOCX] = O_REALLOC, [C_DALLOCX] = O_FREE,
    [C_SDALLOCX] = O_FREE_SIZED, [C_NALLOCX] = -1, [C_MALLCTL] = -1,
    [C_LIBC_MALLOC] = O_MALLOC, [C_LIBC_FREE] = O_FREE, [C_CTOR_REALLOC] = O_REALLOC,
    [C_CTOR_FREE] = O_FREE,
};

static uint64_t sum = 0xcbf29ce484222325ull;
static void mix(uint64_t x) {
    for (int i = 0; i < 8; i++) {
        sum ^= (x >> (8 * i)) & 0xff;
        sum *= 0x100000001b3ull;
    }
}

static void fail(const char *what, unsigned long i) {
    fprintf(stderr, "jemalloc_prog: %s failed (iteration %lu)\n", what, i);
    exit(1);
}

/* Fills n bytes with a pattern of seed and adds a few of them to the checksum. */
static void touch(void *p, size_t n, unsigned seed) {
    unsigned char *b = p;
    memset(b, (int)(seed & 0xff), n);
    b[n / 2] = (unsigned char)(seed >> 3);
    mix(b[0] + 3u * b[n / 2] + 7u * b[n - 1] + n);
}

static void check_zero(const void *p, size_t n, const char *what, unsigned long i) {
    const unsigned char *b = p;
    for (size_t k = 0; k < n; k++)
        if (b[k]) fail(what, i);
}

static void check_aligned(const void *p, size_t a, const char *what, unsigned long i) {
    if ((uintptr_t)p % a) fail(what, i);
}

#define CALL(c) (calls[c]++)

static void iteration(unsigned long i) {
    size_t n = 16 + (i * 37) % 2000;
    unsigned s = (unsigned)i;

    void *a = J(malloc)(n); CALL(C_MALLOC);
    if (!a) fail("malloc", i);
    touch(a, n, s);
    if (J(malloc_usable_size)(a) < n) fail("malloc_usable_size", i);
    CALL(C_USABLE);

    size_t cn = 1 + i % 50;
    uint32_t *c = J(calloc)(cn, sizeof *c); CALL(C_CALLOC);
    if (!c) fail("calloc", i);
    check_zero(c, cn * sizeof *c, "calloc zeroing", i);
    touch(c, cn * sizeof *c, s + 1);

    /* realloc up (a large one every 16th iteration), then down */
    size_t big = (i % 16 == 0) ? (1u << 20) + n : 3 * n;
    unsigned char *r = J(realloc)(a, big); CALL(C_REALLOC);
    if (!r) fail("realloc", i);
    if (r[0] != (unsigned char)(s & 0xff)) fail("realloc kept the contents", i);
    touch(r, big, s + 2);
    r = J(realloc)(r, n / 2 + 1); CALL(C_REALLOC);
    if (!r) fail("realloc down", i);
    mix(r[0]);

    void *pm = NULL;
    size_t pa = (i % 2) ? 64 : 4096;
    if (J(posix_memalign)(&pm, pa, n) != 0 || !pm) fail("posix_memalign", i);
    CALL(C_POSIX_MEMALIGN);
    check_aligned(pm, pa, "posix_memalign alignment", i);
    touch(pm, n, s + 3);

    void *aa = J(aligned_alloc)(256, 512 + 256 * (i % 4)); CALL(C_ALIGNED_ALLOC);
    if (!aa) fail("aligned_alloc", i);
    check_aligned(aa, 256, "aligned_alloc alignment", i);
    touch(aa, 512, s + 4);

    void *ma = J(memalign)(128, n); CALL(C_MEMALIGN);
    if (!ma) fail("memalign", i);
    check_aligned(ma, 128, "memalign alignment", i);
    touch(ma, n, s + 5);

    /* the non-standard API */
    void *x = J(mallocx)(n, 0); CALL(C_MALLOCX);
    if (!x) fail("mallocx", i);
    touch(x, n, s + 6);
    size_t nx = J(nallocx)(n, 0); CALL(C_NALLOCX);
    if (nx != 0 && nx < n) fail("nallocx", i); /* 0: not jemalloc's answer to give */

    void *xz = J(mallocx)(n, MALLOCX_ZERO); CALL(C_MALLOCX_ZERO);
    if (!xz) fail("mallocx(ZERO)", i);
    check_zero(xz, n, "mallocx(ZERO) zeroing", i);
    touch(xz, n, s + 7);

    void *xa = J(mallocx)(n, MALLOCX_ALIGN(64)); CALL(C_MALLOCX_ALIGN);
    if (!xa) fail("mallocx(ALIGN(64))", i);
    check_aligned(xa, 64, "mallocx(ALIGN(64)) alignment", i);
    touch(xa, n, s + 8);

    void *xaz = J(mallocx)(8192, MALLOCX_ALIGN(4096) | MALLOCX_ZERO); CALL(C_MALLOCX_ALIGN_ZERO);
    if (!xaz) fail("mallocx(ALIGN(4096)|ZERO)", i);
    check_aligned(xaz, 4096, "mallocx(ALIGN(4096)|ZERO) alignment", i);
    check_zero(xaz, 8192, "mallocx(ALIGN(4096)|ZERO) zeroing", i);
    touch(xaz, 8192, s + 9);

    unsigned char *xr = J(rallocx)(x, 4 * n, 0); CALL(C_RALLOCX);
    if (!xr) fail("rallocx", i);
    if (xr[0] != (unsigned char)((s + 6) & 0xff)) fail("rallocx kept the contents", i);
    touch(xr, 4 * n, s + 10);

    /* frees: sized where the size is known, as a C++ or Rust runtime would */
    J(sdallocx)(xr, 4 * n, 0); CALL(C_SDALLOCX);
    J(sdallocx)(xa, n, MALLOCX_ALIGN(64)); CALL(C_SDALLOCX);
    J(dallocx)(xaz, MALLOCX_ALIGN(4096)); CALL(C_DALLOCX);
    J(dallocx)(xz, 0); CALL(C_DALLOCX);
    J(free)(ma); CALL(C_FREE);
    J(free)(aa); CALL(C_FREE);
    J(free)(pm); CALL(C_FREE);
    J(free)(r); CALL(C_FREE);
    J(free)(c); CALL(C_FREE);
    J(free)(NULL); CALL(C_FREE_NULL);

#ifdef JE_PREFIX
    /* plain malloc/free: the C library's (or a preloaded shim's), not jemalloc's */
    char *l = malloc(n); CALL(C_LIBC_MALLOC);
    if (!l) fail("libc malloc", i);
    touch(l, n, s + 11);
    free(l); CALL(C_LIBC_FREE);
#endif
}

int main(int argc, char **argv) {
    int verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    if (verbose) argc--, argv++;
    unsigned long iters = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;

    const char *version = NULL;
    size_t vlen = sizeof version;
    int err = J(mallctl)("version", &version, &vlen, NULL, 0);
    CALL(C_MALLCTL);
    if (err == 0 && (!version || version[0] != '5')) fail("mallctl(\"version\") (not jemalloc 5)", 0);
    if (verbose) fprintf(stderr, "mallctl(\"version\"): %s\n", err == 0 ? version : strerror(err));

#ifdef CTORBLOCK
    /* The blocks libctorblock's constructor allocated before main: made by this executable's
     * malloc before any preloaded library's constructor ran. */
    for (int w = 0; w < 2; w++) {
        unsigned char *b = ctorblock_get(w);
        size_t bn = ctorblock_size(w);
        if (!b) fail("ctorblock_get", 0);
        for (size_t k = 0; k < bn; k++)
            if (b[k] != (unsigned char)(0xc0 + w)) fail("the constructor's block", 0);
        if (J(malloc_usable_size)(b) < bn) fail("malloc_usable_size(the constructor's block)", 0);
        CALL(C_USABLE);
        if (w == 1) {
            b = J(realloc)(b, 3 * bn); CALL(C_CTOR_REALLOC);
            if (!b) fail("realloc(the constructor's block)", 0);
            for (size_t k = 0; k < bn; k++)
                if (b[k] != 0xc1) fail("realloc(the constructor's block) kept the contents", 0);
            touch(b, 3 * bn, 0xc1);
        }
        mix(b[0]);
        J(free)(b); CALL(C_CTOR_FREE);
    }
#endif

    for (unsigned long i = 0; i < iters; i++) iteration(i);

    unsigned long ops[NOPS] = {0};
    for (int c = 0; c < NCALLS; c++)
        if (call_op[c] >= 0) ops[call_op[c]] += calls[c];
    unsigned long allocs = ops[O_MALLOC] + ops[O_CALLOC] + ops[O_POSIX_MEMALIGN] +
                           ops[O_ALIGNED_ALLOC] + ops[O_MEMALIGN];
    unsigned long frees = ops[O_FREE] + ops[O_FREE_SIZED];
    unsigned long not_recorded = calls[C_USABLE] + calls[C_NALLOCX] + calls[C_MALLCTL];

    printf("checksum %lu %016llx\n", iters, (unsigned long long)sum);
    printf("{\"allocs\":%lu,\"frees\":%lu,\"reallocs\":%lu,\"free_sized\":%lu,\"not_recorded\":%lu,"
           "\"calls\":{",
           allocs, frees, ops[O_REALLOC], ops[O_FREE_SIZED], not_recorded);
    for (int c = 0; c < NCALLS; c++) printf("%s\"%s\":%lu", c ? "," : "", call_names[c], calls[c]);
    printf("},\"ops\":{");
    for (int o = 0; o < NOPS; o++) printf("%s\"%s\":%lu", o ? "," : "", op_names[o], ops[o]);
    printf("}}\n");
    return 0;
}
