/* tcmalloc_props.c: a program linked with Debian's libtcmalloc_minimal.so.4 that asks every
 * numeric property gperftools 2.10 answers (TCMallocImplementation::GetNumericProperty in
 * its src/tcmalloc.cc), and one it does not, after a burst of blocks half freed. Under the
 * shim switched to another backend (itest/tests/tcmalloc_properties.rs) the emulation
 * (backend/src/emulate/tcmalloc.rs) answers; bare, tcmalloc does.
 *
 * itest-link: -ltcmalloc_minimal
 *
 * Prints one line per property: NAME<TAB>RC<TAB>VALUE (RC: 1 answered, 0 not), then
 * "allocated_size<TAB>N" (MallocExtension_GetAllocatedSize of a 1000-byte block: at least
 * 1000) after MallocExtension_MarkThreadIdle and MallocExtension_ReleaseFreeMemory.
 */
#include <gperftools/malloc_extension_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const PROPERTIES[] = {
    "generic.current_allocated_bytes",
    "generic.heap_size",
    "generic.total_physical_bytes",
    "tcmalloc.slack_bytes",
    "tcmalloc.central_cache_free_bytes",
    "tcmalloc.transfer_cache_free_bytes",
    "tcmalloc.thread_cache_free_bytes",
    "tcmalloc.pageheap_free_bytes",
    "tcmalloc.pageheap_unmapped_bytes",
    "tcmalloc.pageheap_committed_bytes",
    "tcmalloc.pageheap_scavenge_count",
    "tcmalloc.pageheap_commit_count",
    "tcmalloc.pageheap_total_commit_bytes",
    "tcmalloc.pageheap_decommit_count",
    "tcmalloc.pageheap_total_decommit_bytes",
    "tcmalloc.pageheap_reserve_count",
    "tcmalloc.pageheap_total_reserve_bytes",
    "tcmalloc.max_total_thread_cache_bytes",
    "tcmalloc.current_total_thread_cache_bytes",
    "tcmalloc.aggressive_memory_decommit",
    "tcmalloc.heap_limit_mb",
    "tcmalloc.no_such_property",
};

int main(void) {
    enum { N = 4096 };
    static void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(64 + (size_t)(i % 64) * 64);
        memset(blocks[i], 1, 64);
    }
    for (int i = 0; i < N; i += 2) free(blocks[i]);
    for (size_t i = 0; i < sizeof(PROPERTIES) / sizeof(PROPERTIES[0]); i++) {
        size_t v = 0;
        int rc = MallocExtension_GetNumericProperty(PROPERTIES[i], &v);
        printf("%s\t%d\t%zu\n", PROPERTIES[i], rc, v);
    }
    void *p = malloc(1000);
    MallocExtension_MarkThreadIdle();
    MallocExtension_ReleaseFreeMemory();
    printf("allocated_size\t%zu\n", MallocExtension_GetAllocatedSize(p));
    free(p);
    for (int i = 1; i < N; i += 2) free(blocks[i]);
    return 0;
}
