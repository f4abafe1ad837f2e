/* jemalloc_walk.c: a program linked with Debian's libjemalloc.so.2 that walks jemalloc's
 * whole mallctl namespace, or reads its fragmentation as Redis and Valkey do. Under the shim
 * switched to another backend (itest/tests/jemalloc_namespace.rs) every one of its calls is
 * answered by the emulation (backend/src/emulate/jemalloc.rs); bare, by jemalloc itself.
 *
 * itest-link: -ljemalloc
 *
 * jemalloc_walk walk NAMES
 *   NAMES is backend/src/emulate/jemalloc-5.3.0-ctl.txt: every name of jemalloc 5.3.0's
 *   src/ctl.c, an indexed element written {INDEX}. Each name is expanded over the indices
 *   below (one past jemalloc's bounds on x86-64 with 4 KiB pages: 36 bins, 196 large size
 *   classes, 199 page size classes, 64 HPA slab sizes; arena 0, MALLCTL_ARENAS_ALL 4096 and
 *   MALLCTL_ARENAS_DESTROYED 4097 where jemalloc reads them safely), then asked, one line each:
 *
 *   NAME n=RC:LEN:MIB r=RC:LEN x=RC:LEN m=RC:LEN mx=RC:LEN w=RC v=VALUE
 *
 *   n   mallctlnametomib(NAME, mib, &len = 7): its return code, the MIB's length and the MIB
 *       (elements joined by '.')
 *   r   mallctl(NAME, buf, &len = 64, NULL, 0): return code and *oldlenp after (a read of
 *       the wrong size gives jemalloc's EINVAL with the value's size in *oldlenp)
 *   x   the read again with the size r gave (or 8, a pointer's, when r left 64): rc and size
 *   m   mallctlbymib(the MIB, buf, &len = 64, NULL, 0); mx as x, by MIB
 *   w   when x read a value: mallctl(NAME, NULL, NULL, the value, its size), writing back
 *       what was read (EPERM for a read-only name, 0 for a setting)
 *   v   the value x read: decimal for 1, 4 and 8 bytes, hex bytes otherwise, '-' for none
 *   A call not made is written '-'.
 *
 * jemalloc_walk redis
 *   Redis' and Valkey's src/zmalloc.c: zmalloc_get_allocator_info (epoch written, then
 *   stats.resident, .active, .allocated, .retained, stats.arenas.4096.pmuzzy, arenas.page)
 *   and zmalloc_get_frag_smallbins (arenas.nbins, then for each bin arenas.bin.<j>.size,
 *   stats.arenas.4096.bins.<j>.curregs, arenas.bin.<j>.nregs, .curslabs), with their
 *   asserts (exit 1 naming the call), after a burst of small blocks of every bin's size,
 *   half of them freed. Prints one JSON line:
 *   {"allocated":A,"active":B,"resident":C,"retained":D,"muzzy":E,"frag_smallbins":F,
 *    "nbins":N,"bins_consistent":true|false}
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jemalloc/jemalloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The indices each indexed node is walked over (the index function's name in ctl.c). */
struct range {
    const char *index;
    const size_t *list; /* explicit indices, or NULL: 0..=last */
    size_t n;
    size_t last;
};
static const size_t ARENAS[] = {0, 4096};
static const size_t STATS_ARENAS[] = {0, 4096, 4097};
static const size_t ONE[] = {0};
static const struct range RANGES[] = {
    {"arena_i", ARENAS, 2, 0},
    {"stats_arenas_i", STATS_ARENAS, 3, 0},
    {"experimental_arenas_i", ARENAS, 2, 0},
    {"arenas_bin_i", NULL, 0, 37},
    {"stats_arenas_i_bins_j", NULL, 0, 37},
    {"arenas_lextent_i", NULL, 0, 197},
    {"stats_arenas_i_lextents_j", NULL, 0, 197},
    {"stats_arenas_i_extents_j", NULL, 0, 200},
    {"stats_arenas_i_hpa_shard_nonfull_slabs_j", NULL, 0, 64},
    {"prof_stats_bins_i", ONE, 1, 0},
    {"prof_stats_lextents_i", ONE, 1, 0},
};

static const struct range *range_of(const char *index, size_t len) {
    for (size_t i = 0; i < sizeof(RANGES) / sizeof(RANGES[0]); i++) {
        if (strlen(RANGES[i].index) == len && memcmp(RANGES[i].index, index, len) == 0) return &RANGES[i];
    }
    fprintf(stderr, "jemalloc_walk: no indices for {%.*s}: add them to RANGES\n", (int)len, index);
    exit(2);
}

static void value_text(char *out, size_t cap, const unsigned char *v, size_t n) {
    uint64_t x = 0;
    if (n == 1) {
        snprintf(out, cap, "%u", v[0]);
    } else if (n == 4) {
        uint32_t u;
        memcpy(&u, v, 4);
        snprintf(out, cap, "%u", u);
    } else if (n == 8) {
        memcpy(&x, v, 8);
        snprintf(out, cap, "%llu", (unsigned long long)x);
    } else {
        size_t k = 0;
        for (size_t i = 0; i < n && k + 3 < cap; i++) k += (size_t)snprintf(out + k, cap - k, "%02x", v[i]);
        if (n == 0) snprintf(out, cap, "-");
    }
}

/* The names that read nothing without an input (jemalloc dereferences the pointer it is
 * given, NULL too): asked once, with a block of this program's, by name and by MIB. */
static bool ask_with_input(const char *name) {
    void *p = malloc(100);
    void *ptrs[2] = {p, p};
    size_t out[8];
    size_t len, inlen;
    void *in;
    if (strcmp(name, "arenas.lookup") == 0) {
        len = sizeof(unsigned), in = &p, inlen = sizeof(p);
    } else if (strcmp(name, "experimental.utilization.query") == 0) {
        len = sizeof(void *) + 5 * sizeof(size_t), in = &p, inlen = sizeof(p);
    } else if (strcmp(name, "experimental.utilization.batch_query") == 0) {
        len = 2 * 3 * sizeof(size_t), in = ptrs, inlen = sizeof(ptrs);
    } else {
        free(p);
        return false;
    }
    size_t mib[8];
    size_t miblen = 7;
    int n = mallctlnametomib(name, mib, &miblen);
    size_t l = len;
    int r = mallctl(name, out, &l, in, inlen);
    size_t ml = len;
    int m = n == 0 ? mallctlbymib(mib, miblen, out, &ml, in, inlen) : -1;
    printf("%s\tn=%d:%zu:", name, n, n == 0 ? miblen : 0);
    for (size_t i = 0; n == 0 && i < miblen; i++) printf("%s%zu", i ? "." : "", mib[i]);
    printf("\tr=%d:%zu\tx=-\tm=%d:%zu\tmx=-\tw=-\tv=-\n", r, l, m, ml);
    free(p);
    return true;
}

/* Asks everything of one expanded name. */
static void ask(const char *name) {
    if (ask_with_input(name)) return;
    size_t mib[8] = {0};
    size_t miblen = 7;
    int n = mallctlnametomib(name, mib, &miblen);
    char mibtext[128] = "";
    if (n == 0) {
        size_t k = 0;
        for (size_t i = 0; i < miblen && k + 24 < sizeof(mibtext); i++)
            k += (size_t)snprintf(mibtext + k, sizeof(mibtext) - k, "%s%zu", i ? "." : "", mib[i]);
    }

    unsigned char buf[64];
    unsigned char val[64];
    memset(buf, 0, sizeof(buf));
    size_t len = sizeof(buf);
    int r = mallctl(name, buf, &len, NULL, 0);
    size_t rlen = len;

    int x = -1;
    size_t xlen = 0;
    bool have_value = false;
    if (r == EINVAL && rlen > 0) {
        xlen = rlen < sizeof(buf) ? rlen : sizeof(void *);
        memset(val, 0, sizeof(val));
        size_t l = xlen;
        x = mallctl(name, val, &l, NULL, 0);
        xlen = l;
        have_value = x == 0;
    }

    int m = -1, mx = -1;
    size_t mlen = 0, mxlen = 0;
    if (n == 0) {
        memset(buf, 0, sizeof(buf));
        mlen = sizeof(buf);
        m = mallctlbymib(mib, miblen, buf, &mlen, NULL, 0);
        if (m == EINVAL && mlen > 0) {
            mxlen = mlen < sizeof(buf) ? mlen : sizeof(void *);
            size_t l = mxlen;
            mx = mallctlbymib(mib, miblen, buf, &l, NULL, 0);
            mxlen = l;
        }
    }

    int w = -1;
    if (have_value) w = mallctl(name, NULL, NULL, val, xlen);

    char v[160];
    if (have_value) {
        value_text(v, sizeof(v), val, xlen);
    } else {
        snprintf(v, sizeof(v), "-");
    }
    printf("%s\tn=%d:%zu:%s\tr=%d:%zu\t", name, n, n == 0 ? miblen : 0, mibtext, r, rlen);
    if (x == -1) printf("x=-\t"); else printf("x=%d:%zu\t", x, xlen);
    if (n == 0) printf("m=%d:%zu\t", m, mlen); else printf("m=-\t");
    if (mx == -1) printf("mx=-\t"); else printf("mx=%d:%zu\t", mx, mxlen);
    if (w == -1) printf("w=-\t"); else printf("w=%d\t", w);
    printf("v=%s\n", v);
}

/* Expands the first {INDEX} of `pattern` (written into `name` from `at`) and recurses. */
static void expand(const char *pattern, char *name, size_t at, size_t cap) {
    const char *open = strchr(pattern, '{');
    if (!open) {
        snprintf(name + at, cap - at, "%s", pattern);
        ask(name);
        return;
    }
    size_t pre = (size_t)(open - pattern);
    const char *close = strchr(open, '}');
    if (!close || at + pre >= cap) {
        fprintf(stderr, "jemalloc_walk: bad name pattern %s\n", pattern);
        exit(2);
    }
    memcpy(name + at, pattern, pre);
    const struct range *r = range_of(open + 1, (size_t)(close - open - 1));
    size_t count = r->list ? r->n : r->last + 1;
    for (size_t i = 0; i < count; i++) {
        size_t idx = r->list ? r->list[i] : i;
        int k = snprintf(name + at + pre, cap - at - pre, "%zu", idx);
        expand(close + 1, name, at + pre + (size_t)k, cap);
    }
}

static int walk(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "jemalloc_walk: cannot open %s: %s\n", path, strerror(errno));
        return 2;
    }
    /* Every thread that asks has allocated first (jemalloc's thread cache then exists). */
    free(malloc(1));
    char line[512];
    char name[512];
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char *tab = strchr(line, '\t');
        if (tab) *tab = 0;
        expand(line, name, 0, sizeof(name));
    }
    fclose(f);
    return 0;
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ != 0) {                                                               \
            fprintf(stderr, "jemalloc_walk redis: %s failed: %d\n", #call, rc_);      \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static int redis(void) {
    /* A heap with blocks of every small size, half of them freed (as a server's keys come
     * and go), so that the bins are not empty. */
    enum { PER = 512 };
    static void *blocks[40][PER];
    unsigned nbins = 0;
    size_t sz = sizeof(nbins);
    CHECK(mallctl("arenas.nbins", &nbins, &sz, NULL, 0));
    if (nbins > 40) nbins = 40;
    for (unsigned j = 0; j < nbins; j++) {
        char buf[100];
        size_t reg = 0;
        sz = sizeof(reg);
        snprintf(buf, sizeof(buf), "arenas.bin.%u.size", j);
        CHECK(mallctl(buf, &reg, &sz, NULL, 0));
        for (int i = 0; i < PER; i++) {
            blocks[j][i] = malloc(reg);
            memset(blocks[j][i], 1, reg);
        }
        for (int i = 0; i < PER; i += 2) free(blocks[j][i]);
    }

    /* zmalloc_get_allocator_info, line by line (Valkey 8, Redis 7.2). */
    size_t allocated, active, resident, retained, muzzy;
    uint64_t epoch = 1;
    sz = sizeof(epoch);
    mallctl("epoch", &epoch, &sz, &epoch, sz);
    sz = sizeof(size_t);
    mallctl("stats.resident", &resident, &sz, NULL, 0);
    mallctl("stats.active", &active, &sz, NULL, 0);
    mallctl("stats.allocated", &allocated, &sz, NULL, 0);
    retained = 0;
    mallctl("stats.retained", &retained, &sz, NULL, 0);
    {
        size_t pmuzzy, page;
        char buf[100];
        snprintf(buf, sizeof(buf), "stats.arenas.%u.pmuzzy", 4096u);
        CHECK(mallctl(buf, &pmuzzy, &sz, NULL, 0));
        CHECK(mallctl("arenas.page", &page, &sz, NULL, 0));
        muzzy = pmuzzy * page;
    }
    /* zmalloc_get_frag_smallbins. */
    size_t frag = 0;
    bool consistent = true;
    sz = sizeof(unsigned);
    CHECK(mallctl("arenas.nbins", &nbins, &sz, NULL, 0));
    for (unsigned j = 0; j < nbins; j++) {
        size_t curregs, curslabs, reg_size;
        uint32_t nregs;
        char buf[100];
        snprintf(buf, sizeof(buf), "arenas.bin.%d.size", j);
        sz = sizeof(size_t);
        CHECK(mallctl(buf, &reg_size, &sz, NULL, 0));
        snprintf(buf, sizeof(buf), "stats.arenas.%u.bins.%d.curregs", 4096u, j);
        sz = sizeof(size_t);
        CHECK(mallctl(buf, &curregs, &sz, NULL, 0));
        snprintf(buf, sizeof(buf), "arenas.bin.%d.nregs", j);
        sz = sizeof(uint32_t);
        CHECK(mallctl(buf, &nregs, &sz, NULL, 0));
        snprintf(buf, sizeof(buf), "stats.arenas.%u.bins.%d.curslabs", 4096u, j);
        sz = sizeof(size_t);
        CHECK(mallctl(buf, &curslabs, &sz, NULL, 0));
        if (curregs > nregs * curslabs) consistent = false;
        frag += ((nregs * curslabs) - curregs) * reg_size;
    }
    printf("{\"allocated\":%zu,\"active\":%zu,\"resident\":%zu,\"retained\":%zu,\"muzzy\":%zu,"
           "\"frag_smallbins\":%zu,\"nbins\":%u,\"bins_consistent\":%s}\n",
           allocated, active, resident, retained, muzzy, frag, nbins, consistent ? "true" : "false");
    for (unsigned j = 0; j < nbins && j < 40; j++)
        for (int i = 1; i < PER; i += 2) free(blocks[j][i]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "walk") == 0) return walk(argv[2]);
    if (argc == 2 && strcmp(argv[1], "redis") == 0) return redis();
    fprintf(stderr, "usage: jemalloc_walk walk NAMES | jemalloc_walk redis\n");
    return 2;
}
