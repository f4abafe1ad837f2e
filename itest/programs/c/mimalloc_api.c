/* mimalloc_api.c: a program linked with Debian's libmimalloc that calls the functions of
 * mimalloc's public header a program can call (options, statistics, heaps and their
 * allocation, queries) and prints, one line per call, the shape of what it returned:
 *
 *   NAME<TAB>SHAPE
 *
 * SHAPE says what holds whoever serves (non-NULL, a size at least the one asked, a zeroed
 * block, a bool...), never an address or a figure that differs between allocators. Bare,
 * mimalloc answers; under the shim switched to another backend
 * (itest/tests/mimalloc_api.rs), the emulation does (backend/src/emulate/mimalloc.rs,
 * shim/src/patch/mi_api.rs): the lines must be the same. Blocks made in heaps have sizes
 * 4001..4099 so that the test finds them in the log.
 *
 * itest-link: -lmimalloc
 */
#include <mimalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void line(const char *name, const char *shape) { printf("%s\t%s\n", name, shape); }
static const char *nn(const void *p) { return p ? "nonnull" : "null"; }
static const char *tf(int b) { return b ? "true" : "false"; }

static int zeroed(const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++)
    if (c[i]) return 0;
  return 1;
}

/* A block's shape: NULL, or non-NULL with its usable size at least n (and zeroed if asked,
 * aligned if asked). */
static void block(const char *name, void *p, size_t n, size_t align, int zero) {
  char s[128];
  if (!p) {
    line(name, "null");
    return;
  }
  snprintf(s, sizeof s, "nonnull usable>=%d aligned=%d zeroed=%d owned=%d", mi_usable_size(p) >= n,
           align ? ((uintptr_t)p % align == 0) : 1, zero ? zeroed(p, n) : 1, mi_check_owned(p));
  line(name, s);
}

static int visited, visited_blocks;
static bool visitor(const mi_heap_t *h, const mi_heap_area_t *area, void *b, size_t size, void *arg) {
  (void)h;
  (void)arg;
  if (!area) return false;
  if (b) {
    visited_blocks++;
    if (size < 1) visited = -1000000;
  } else
    visited++;
  return true;
}

static size_t printed;
static void out(const char *msg, void *arg) {
  (void)arg;
  printed += strlen(msg);
}

int main(void) {
  volatile size_t huge = SIZE_MAX / 2;
  /* Options: the real library's own table, answered alike. */
  long v0 = mi_option_get(mi_option_max_errors);
  mi_option_set(mi_option_max_errors, v0 + 3);
  line("mi_option_set/get", tf(mi_option_get(mi_option_max_errors) == v0 + 3));
  mi_option_enable(mi_option_show_errors);
  line("mi_option_enable/is_enabled", tf(mi_option_is_enabled(mi_option_show_errors)));
  mi_option_disable(mi_option_show_errors);
  line("mi_option_disable/is_enabled", tf(mi_option_is_enabled(mi_option_show_errors)));
  mi_option_set_enabled(mi_option_verbose, false);
  line("mi_option_set_enabled", tf(mi_option_is_enabled(mi_option_verbose)));
  line("mi_option_get_clamp", tf(mi_option_get_clamp(mi_option_max_errors, 0, 1) == 1));
  line("mi_version", tf(mi_version() >= 200));

  /* Statistics. */
  size_t el, us, sy, rss, prss, com, pcom, pf;
  mi_process_info(&el, &us, &sy, &rss, &prss, &com, &pcom, &pf);
  line("mi_process_info", tf(el < 3600000 && us + sy < 3600000));
  printed = 0;
  mi_stats_print_out(out, NULL);
  line("mi_stats_print_out", tf(printed > 0));
  mi_stats_reset();
  mi_stats_merge();
  printed = 0;
  mi_thread_stats_print_out(out, NULL);
  line("mi_thread_stats_print_out", tf(printed > 0));
  mi_collect(false);
  mi_collect(true);
  line("mi_collect", "returned");

  /* The default heap. */
  mi_heap_t *def = mi_heap_get_default();
  line("mi_heap_get_default", nn(def));
  line("mi_heap_get_backing", nn(mi_heap_get_backing()));
  void *d = mi_heap_malloc(def, 4001);
  block("mi_heap_malloc(default)", d, 4001, 0, 0);
  line("mi_heap_contains_block(default)", tf(mi_heap_contains_block(def, d)));
  mi_free(d);

  /* A heap of its own. */
  mi_heap_t *h = mi_heap_new();
  line("mi_heap_new", nn(h));
  void *a = mi_heap_malloc(h, 4002);
  block("mi_heap_malloc", a, 4002, 0, 0);
  block("mi_heap_malloc_small", mi_heap_malloc_small(h, 100), 100, 0, 0);
  block("mi_heap_zalloc", mi_heap_zalloc(h, 4003), 4003, 0, 1);
  block("mi_heap_calloc", mi_heap_calloc(h, 3, 1335), 4005, 0, 1);
  line("mi_heap_calloc(overflow)", nn(mi_heap_calloc(h, huge, 4)));
  block("mi_heap_mallocn", mi_heap_mallocn(h, 2, 2003), 4006, 0, 0);
  line("mi_heap_mallocn(overflow)", nn(mi_heap_mallocn(h, huge, 4)));
  void *r = mi_heap_malloc(h, 4007);
  r = mi_heap_realloc(h, r, 4090);
  block("mi_heap_realloc", r, 4090, 0, 0);
  r = mi_heap_reallocn(h, r, 2, 2046);
  block("mi_heap_reallocn", r, 4092, 0, 0);
  r = mi_heap_reallocf(h, r, 4093);
  block("mi_heap_reallocf", r, 4093, 0, 0);
  void *z = mi_heap_zalloc(h, 4008);
  z = mi_heap_rezalloc(h, z, 4094);
  block("mi_heap_rezalloc", z, 4094, 0, 1);
  z = mi_heap_recalloc(h, z, 2, 2048);
  block("mi_heap_recalloc", z, 4096, 0, 1);
  block("mi_heap_malloc_aligned", mi_heap_malloc_aligned(h, 4009, 256), 4009, 256, 0);
  block("mi_heap_malloc_aligned_at", mi_heap_malloc_aligned_at(h, 4010, 64, 0), 4010, 64, 0);
  block("mi_heap_zalloc_aligned", mi_heap_zalloc_aligned(h, 4011, 128), 4011, 128, 1);
  block("mi_heap_zalloc_aligned_at", mi_heap_zalloc_aligned_at(h, 4012, 64, 128), 4012, 64, 1);
  block("mi_heap_calloc_aligned", mi_heap_calloc_aligned(h, 4, 1004, 64), 4016, 64, 1);
  block("mi_heap_calloc_aligned_at", mi_heap_calloc_aligned_at(h, 4, 1005, 64, 0), 4020, 64, 1);
  line("mi_heap_malloc_aligned(not a power of two)", nn(mi_heap_malloc_aligned(h, 4013, 48)));
  void *ra = mi_heap_malloc_aligned(h, 4014, 64);
  ra = mi_heap_realloc_aligned(h, ra, 4095, 64);
  block("mi_heap_realloc_aligned", ra, 4095, 64, 0);
  ra = mi_heap_realloc_aligned_at(h, ra, 4096, 64, 0);
  block("mi_heap_realloc_aligned_at", ra, 4096, 64, 0);
  void *za = mi_heap_zalloc_aligned(h, 4015, 64);
  za = mi_heap_rezalloc_aligned(h, za, 4097, 64);
  block("mi_heap_rezalloc_aligned", za, 4097, 64, 1);
  za = mi_heap_rezalloc_aligned_at(h, za, 4098, 64, 0);
  block("mi_heap_rezalloc_aligned_at", za, 4098, 64, 1);
  za = mi_heap_recalloc_aligned(h, za, 2, 2049, 64);
  block("mi_heap_recalloc_aligned", za, 4098, 64, 1);
  za = mi_heap_recalloc_aligned_at(h, za, 1, 4099, 64, 0);
  block("mi_heap_recalloc_aligned_at", za, 4099, 64, 1);
  char *s = mi_heap_strdup(h, "mimalloc");
  line("mi_heap_strdup", s && !strcmp(s, "mimalloc") ? "copied" : "wrong");
  char *sn = mi_heap_strndup(h, "mimalloc", 2);
  line("mi_heap_strndup", sn && !strcmp(sn, "mi") ? "copied" : "wrong");
  char *rp = mi_heap_realpath(h, "/", NULL);
  line("mi_heap_realpath", rp && !strcmp(rp, "/") ? "resolved" : "wrong");
  line("mi_heap_contains_block", tf(mi_heap_contains_block(h, a)));
  line("mi_heap_contains_block(other heap)", tf(mi_heap_contains_block(def, a)));
  line("mi_heap_check_owned", tf(mi_heap_check_owned(h, a)));
  int on_stack = 0;
  line("mi_check_owned(stack)", tf(mi_check_owned(&on_stack)));
  line("mi_is_in_heap_region", tf(mi_is_in_heap_region(a)));
  visited = visited_blocks = 0;
  line("mi_heap_visit_blocks", tf(mi_heap_visit_blocks(h, true, visitor, NULL)));
  line("mi_heap_visit_blocks(areas, blocks)", tf(visited > 0 && visited_blocks >= 20));
  mi_free(a);
  mi_heap_collect(h, true);
  line("mi_heap_collect", "returned");

  /* Default heap switched. */
  mi_heap_t *old = mi_heap_set_default(h);
  line("mi_heap_set_default", tf(old == def));
  line("mi_heap_get_default(after set)", tf(mi_heap_get_default() == h));
  mi_heap_set_default(old);
  mi_heap_destroy(h);
  line("mi_heap_destroy", "returned");

  /* mi_heap_delete: the blocks stay usable. */
  mi_heap_t *h2 = mi_heap_new();
  char *kept = mi_heap_malloc(h2, 4050);
  memset(kept, 7, 4050);
  mi_heap_delete(h2);
  line("mi_heap_delete", kept[4049] == 7 ? "blocks kept" : "blocks lost");
  mi_free(kept);

  /* The plain API's less common calls. */
  block("mi_malloc_small", mi_malloc_small(64), 64, 0, 0);
  block("mi_zalloc_small", mi_zalloc_small(64), 64, 0, 1);
  block("mi_zalloc", mi_zalloc(5000), 5000, 0, 1);
  block("mi_mallocn", mi_mallocn(10, 500), 5000, 0, 0);
  block("mi_malloc_aligned", mi_malloc_aligned(5000, 4096), 5000, 4096, 0);
  block("mi_zalloc_aligned", mi_zalloc_aligned(5000, 64), 5000, 64, 1);
  block("mi_calloc_aligned", mi_calloc_aligned(10, 500, 64), 5000, 64, 1);
  block("mi_malloc_aligned_at", mi_malloc_aligned_at(5000, 64, 0), 5000, 64, 0);
  block("mi_zalloc_aligned_at", mi_zalloc_aligned_at(5000, 64, 0), 5000, 64, 1);
  block("mi_calloc_aligned_at", mi_calloc_aligned_at(10, 500, 64, 0), 5000, 64, 1);
  void *rz = mi_zalloc(100);
  rz = mi_rezalloc(rz, 5000);
  block("mi_rezalloc", rz, 5000, 0, 1);
  rz = mi_recalloc(rz, 2, 3000);
  block("mi_recalloc", rz, 6000, 0, 1);
  rz = mi_recalloc_aligned(rz, 2, 3500, 64);
  block("mi_recalloc_aligned", rz, 7000, 64, 1);
  rz = mi_rezalloc_aligned(rz, 7500, 64);
  block("mi_rezalloc_aligned", rz, 7500, 64, 1);
  rz = mi_realloc_aligned_at(rz, 8000, 64, 0);
  block("mi_realloc_aligned_at", rz, 8000, 64, 0);
  line("mi_reallocarr", tf(mi_reallocarr(&rz, 3, 3000) == 0));
  block("mi_reallocarr(block)", rz, 9000, 0, 0);
  mi_free(rz);
  char *sd = mi_strdup("shim");
  line("mi_strdup", sd && !strcmp(sd, "shim") ? "copied" : "wrong");
  char *snd = mi_strndup("shim", 1);
  line("mi_strndup", snd && !strcmp(snd, "s") ? "copied" : "wrong");
  char *rpp = mi_realpath("/", NULL);
  line("mi_realpath", rpp && !strcmp(rpp, "/") ? "resolved" : "wrong");
  mi_free(sd);
  mi_free(snd);
  mi_free(rpp);
  void *e = mi_malloc(100);
  line("mi_expand(larger)", nn(mi_expand(e, 1 << 20)));
  line("mi_usable_size(NULL)", tf(mi_usable_size(NULL) == 0));
  line("mi_good_size", tf(mi_good_size(100) >= 100 && mi_good_size(100) <= 128));
  line("mi_check_owned", tf(mi_check_owned(e)));
  mi_free(e);
  return 0;
}
