/* stats_prog.c: a server-like C program that reads its own allocator's statistics while it
 * works, as Redis and Valkey do with jemalloc's mallctl and MongoDB with tcmalloc's
 * MallocExtension: a second thread reads every statistic every 10 ms and fails (exit 1,
 * like the servers' asserts) when one read fails, while the main thread makes a burst of
 * allocations, holds them, frees them and asks the allocator to give memory back.
 *
 * Built by itest/programs/ownalloc/build.sh (itest/tests/introspect_switched.rs runs them):
 *   c_je_stats_prefix   -DAPI_JE -DJE_PREFIX, Debian's libjemalloc.a renamed je_* (Redis/Valkey)
 *   c_je_stats_static   -DAPI_JE, Debian's libjemalloc.a (malloc, mallctl, ... in the executable)
 *   c_je_stats_dynamic  -DAPI_JE, -ljemalloc (Debian's libjemalloc.so.2)
 *   c_tc_stats_static   -DAPI_TC, Debian's libtcmalloc_minimal.a
 *   c_tc_stats_dynamic  -DAPI_TC, -ltcmalloc_minimal (libtcmalloc_minimal.so.4)
 *
 * API_JE reads, by name with mallctl: epoch (written, then read), stats.allocated, .active,
 * .resident, .mapped, .retained, .metadata, arenas.narenas, arenas.page, opt.narenas,
 * opt.tcache, version; stats.arenas.<i>.pactive/pdirty/pmuzzy for arena 0 and
 * MALLCTL_ARENAS_ALL (4096), by name and through mallctlnametomib + mallctlbymib (the
 * arena index put into the MIB); thread.tcache.flush. Once: malloc_stats_print into a
 * callback (its text must hold "Allocated"), jemalloc's conventions (a read of the wrong
 * size is EINVAL, a write to a statistic EPERM, an unknown name ENOENT), and
 * malloc_usable_size on each large block; after the frees, arena.<ALL>.purge.
 * API_TC reads MallocExtension_GetNumericProperty's generic.current_allocated_bytes,
 * generic.heap_size, generic.total_physical_bytes, tcmalloc.pageheap_free_bytes,
 * tcmalloc.pageheap_unmapped_bytes and MallocExtension_GetStats; once, an unknown
 * property (0) and MallocExtension_GetAllocatedSize on each large block; after the frees,
 * MallocExtension_ReleaseFreeMemory.
 *
 * Usage: PROG [BURST_MIB] (default 64). Prints one JSON line:
 *   {"before":A,"during":B,"after":C,"reads":N,"max_seen":M,"stats_print":LEN}
 * where A, B, C are the allocated bytes the allocator reports before the burst, while it
 * is held and after the frees, N the reading thread's rounds, M the most it saw.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(JE_PREFIX)
#define J(name) je_##name
#else
#define J(name) name
#endif

static void fail(const char *what, int rc) {
    fprintf(stderr, "stats_prog: %s failed (%d)\n", what, rc);
    exit(1);
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

#if defined(API_JE)
/* jemalloc's API, declared here rather than from <jemalloc/jemalloc.h> (whose macros depend
 * on how the library was configured). */
void *J(malloc)(size_t);
void J(free)(void *);
size_t J(malloc_usable_size)(void *);
int J(mallctl)(const char *, void *, size_t *, void *, size_t);
int J(mallctlnametomib)(const char *, size_t *, size_t *);
int J(mallctlbymib)(const size_t *, size_t, void *, size_t *, void *, size_t);
void J(malloc_stats_print)(void (*)(void *, const char *), void *, const char *);
#define ALLOC(n) J(malloc)(n)
#define FREE(p) J(free)(p)
#define ARENAS_ALL 4096

static void get(const char *name, void *out, size_t size) {
    size_t len = size;
    int rc = J(mallctl)(name, out, &len, NULL, 0);
    if (rc != 0 || len != size) fail(name, rc);
}

static size_t get_size(const char *name) {
    size_t v = 0;
    get(name, &v, sizeof v);
    return v;
}

static void act(const char *name) {
    int rc = J(mallctl)(name, NULL, NULL, NULL, 0);
    if (rc != 0) fail(name, rc);
}

/* MIBs of the per-arena page counts, the arena index at mib[2]. */
static const char *const arena_stats[3] = {"pactive", "pdirty", "pmuzzy"};
static size_t arena_mib[3][4];

static void make_mibs(void) {
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "stats.arenas.0.%s", arena_stats[k]);
        size_t len = 4;
        int rc = J(mallctlnametomib)(name, arena_mib[k], &len);
        if (rc != 0 || len != 4) fail("mallctlnametomib", rc);
    }
}

/* One round of every statistic; returns stats.allocated. */
static size_t read_all(void) {
    uint64_t epoch = 1;
    size_t elen = sizeof epoch;
    int rc = J(mallctl)("epoch", &epoch, &elen, &epoch, sizeof epoch);
    if (rc != 0) fail("epoch", rc);
    size_t allocated = get_size("stats.allocated");
    static const char *const totals[] = {"stats.active", "stats.resident", "stats.mapped",
                                         "stats.retained", "stats.metadata", "arenas.page"};
    for (size_t i = 0; i < sizeof totals / sizeof *totals; i++) get_size(totals[i]);
    unsigned narenas = 0;
    get("arenas.narenas", &narenas, sizeof narenas);
    if (narenas == 0) fail("arenas.narenas is 0", 0);
    get("opt.narenas", &narenas, sizeof narenas);
    bool tcache;
    get("opt.tcache", &tcache, sizeof tcache);
    const char *version = NULL;
    get("version", &version, sizeof version);
    if (version == NULL || version[0] < '0' || version[0] > '9') fail("version", 0);
    size_t arenas[2] = {0, ARENAS_ALL};
    for (int a = 0; a < 2; a++) {
        for (int k = 0; k < 3; k++) {
            char name[64];
            snprintf(name, sizeof name, "stats.arenas.%zu.%s", arenas[a], arena_stats[k]);
            size_t by_name = get_size(name);
            size_t mib[4];
            memcpy(mib, arena_mib[k], sizeof mib);
            mib[2] = arenas[a];
            size_t v = 0, len = sizeof v;
            rc = J(mallctlbymib)(mib, 4, &v, &len, NULL, 0);
            if (rc != 0 || len != sizeof v) fail("mallctlbymib", rc);
            (void)by_name;
        }
    }
    act("thread.tcache.flush");
    return allocated;
}

static void stats_cb(void *arg, const char *s) {
    size_t *len = arg;
    *len += strlen(s);
    if (strstr(s, "Allocated") != NULL) len[1] = 1;
}

/* Once: malloc_stats_print and jemalloc's error conventions. Returns the text's length. */
static size_t checks_once(void) {
    size_t out[2] = {0, 0};
    J(malloc_stats_print)(stats_cb, out, NULL);
    if (out[0] == 0 || out[1] == 0) fail("malloc_stats_print (no \"Allocated\" line)", 0);
    size_t v = 0, len = 4;
    int rc = J(mallctl)("stats.allocated", &v, &len, NULL, 0);
    if (rc != EINVAL || len != 4) fail("a short read of stats.allocated is EINVAL", rc);
    len = sizeof v;
    rc = J(mallctl)("stats.allocated", NULL, NULL, &v, sizeof v);
    if (rc != EPERM) fail("a write to stats.allocated is EPERM", rc);
    rc = J(mallctl)("no.such.name", &v, &len, NULL, 0);
    if (rc != ENOENT) fail("an unknown name is ENOENT", rc);
    return out[0];
}

static void usable(void *p, size_t n) {
    if (J(malloc_usable_size)(p) < n) fail("malloc_usable_size", 0);
}

static void give_back(void) {
    act("arena.4096.purge");
    act("arena.0.decay");
}

#elif defined(API_TC)
#include <gperftools/malloc_extension_c.h>
#define ALLOC(n) malloc(n)
#define FREE(p) free(p)

static size_t prop(const char *name) {
    size_t v = 0;
    if (!MallocExtension_GetNumericProperty(name, &v)) fail(name, 0);
    return v;
}

static void make_mibs(void) {}

static size_t read_all(void) {
    size_t allocated = prop("generic.current_allocated_bytes");
    prop("generic.heap_size");
    prop("generic.total_physical_bytes");
    prop("tcmalloc.pageheap_free_bytes");
    prop("tcmalloc.pageheap_unmapped_bytes");
    char buf[4096];
    buf[0] = 0;
    MallocExtension_GetStats(buf, sizeof buf);
    if (strstr(buf, "MALLOC") == NULL) fail("MallocExtension_GetStats", 0);
    return allocated;
}

static size_t checks_once(void) {
    size_t v = 7;
    if (MallocExtension_GetNumericProperty("tcmalloc.no_such_property", &v) != 0 || v != 7)
        fail("an unknown property is 0", 0);
    char buf[8192];
    buf[0] = 0;
    MallocExtension_GetStats(buf, sizeof buf);
    return strlen(buf);
}

static void usable(void *p, size_t n) {
    if (MallocExtension_GetAllocatedSize(p) < n) fail("MallocExtension_GetAllocatedSize", 0);
}

static void give_back(void) { MallocExtension_ReleaseFreeMemory(); }
#else
#error "build with -DAPI_JE or -DAPI_TC"
#endif

static atomic_bool stop;
static atomic_size_t max_seen;
static atomic_long reads;

static void *reader(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        size_t a = read_all();
        size_t m = atomic_load(&max_seen);
        while (a > m && !atomic_compare_exchange_weak(&max_seen, &m, a)) {
        }
        atomic_fetch_add(&reads, 1);
        sleep_ms(10);
    }
    return NULL;
}

int main(int argc, char **argv) {
    size_t burst_mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    make_mibs();
    size_t printed = checks_once();
    size_t before = read_all();
    pthread_t t;
    if (pthread_create(&t, NULL, reader, NULL) != 0) fail("pthread_create", 0);
    sleep_ms(30);

    /* The burst: 1 MiB blocks and as many bytes again in small ones, all touched. */
    size_t nbig = burst_mib, nsmall = burst_mib * 1024 * 1024 / 256;
    void **big = calloc(nbig, sizeof *big), **small = calloc(nsmall, sizeof *small);
    if (big == NULL || small == NULL) fail("calloc", 0);
    for (size_t i = 0; i < nbig; i++) {
        big[i] = ALLOC(1 << 20);
        if (big[i] == NULL) fail("malloc", 0);
        memset(big[i], (int)i, 1 << 20);
        usable(big[i], 1 << 20);
    }
    for (size_t i = 0; i < nsmall; i++) {
        small[i] = ALLOC(256);
        if (small[i] == NULL) fail("malloc", 0);
        memset(small[i], (int)i, 256);
    }
    sleep_ms(50);
    size_t during = read_all();

    for (size_t i = 0; i < nbig; i++) FREE(big[i]);
    for (size_t i = 0; i < nsmall; i++) FREE(small[i]);
    free(big);
    free(small);
    give_back();
    sleep_ms(50);
    size_t after = read_all();

    atomic_store(&stop, true);
    pthread_join(t, NULL);
    printf("{\"before\":%zu,\"during\":%zu,\"after\":%zu,\"reads\":%ld,\"max_seen\":%zu,\"stats_print\":%zu}\n",
           before, during, after, atomic_load(&reads), atomic_load(&max_seen), printed);
    return 0;
}
