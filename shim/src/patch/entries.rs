//! The entry points of the allocators programs link in, by name: what each takes and what it
//! does ([`Kind`]), so that one wrapper per kind can record it and, when switched, serve it
//! from the shim's backend with the same semantics.

/// What an entry point does, and its arguments (the digit is their number).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Kind {
    /// malloc(size)
    Alloc1,
    /// mi_zalloc(size): zeroed
    Zalloc1,
    /// calloc(count, size)
    Calloc2,
    /// mi_mallocn(count, size): overflow-checked, not zeroed
    Mallocn2,
    /// realloc(p, size)
    Realloc2,
    /// mi_reallocf(p, size): frees p when it fails
    Reallocf2,
    /// mi_expand(p, size): in place or NULL
    Expand2,
    /// reallocarray(p, count, size)
    Reallocarray3,
    /// free(p)
    Free1,
    /// free(p, x): dallocx(p, flags), delete(p, nothrow), delete(p, align)
    Free2,
    /// free(p, x, y): delete(p, align, nothrow)
    Free3,
    /// free(p, size): sized delete, free_sized, mi_free_size
    FreeSized2,
    /// free(p, size, x): sdallocx(p, size, flags), delete(p, size, align)
    FreeSized3,
    /// free_aligned_sized(p, align, size)
    FreeAlignedSized3,
    /// posix_memalign(out, align, size)
    PosixMemalign3,
    /// aligned_alloc(align, size)
    AlignedAlloc2,
    /// memalign(align, size)
    Memalign2,
    /// valloc(size)
    Valloc1,
    /// pvalloc(size)
    Pvalloc1,
    /// malloc_usable_size(p)
    Usable1,
    /// mi_good_size(size)
    GoodSize1,
    /// mi_malloc_aligned(size, align)
    AllocAligned2,
    /// mi_zalloc_aligned(size, align)
    ZallocAligned2,
    /// mi_calloc_aligned(count, size, align)
    CallocAligned3,
    /// mi_realloc_aligned(p, size, align)
    ReallocAligned3,
    /// mallocx(size, flags)
    Mallocx2,
    /// rallocx(p, size, flags)
    Rallocx3,
    /// xallocx(p, size, extra, flags)
    Xallocx4,
    /// sallocx(p, flags)
    Sallocx2,
    /// nallocx(size, flags)
    Nallocx2,
    /// mallctl(name, oldp, oldlenp, newp, newlen)
    Mallctl5,
    /// mallctlnametomib(name, mibp, miblenp)
    Nametomib3,
    /// mallctlbymib(mib, miblen, oldp, oldlenp, newp, newlen)
    Bymib6,
    /// operator new(size), throwing
    CxxNew1,
    /// operator new(size, nothrow)
    CxxNewNothrow2,
    /// operator new(size, align), throwing
    CxxNewAligned2,
    /// operator new(size, align, nothrow)
    CxxNewAlignedNothrow3,
    // Introspection, answered by the serving backend when switched (backend/src/emulate).
    /// malloc_stats_print(write_cb, cbopaque, opts)
    StatsPrint3,
    /// MallocExtension_GetNumericProperty(name, *value) -> int
    TcGetProperty2,
    /// MallocExtension_SetNumericProperty(name, value) -> int
    TcSetProperty2,
    /// MallocExtension_GetStats(buf, len)
    TcGetStats2,
    /// MallocExtension_ReleaseFreeMemory()
    TcRelease0,
    /// MallocExtension_ReleaseToSystem(bytes)
    TcReleaseToSystem1,
    /// MallocExtension_MarkThreadIdle()
    TcMarkIdle0,
    /// tc_malloc_stats(): statistics on stderr
    TcMallocStats0,
    /// mi_process_info(8 out pointers)
    MiProcessInfo8,
    /// mi_stats_print_out(out, arg)
    MiStatsPrintOut2,
    /// mi_stats_print(out)
    MiStatsPrint1,
    /// mi_stats_reset()
    MiStatsReset0,
    /// mi_stats_merge()
    MiStatsMerge0,
    /// mi_collect(force)
    MiCollect1,
    /// get_defrag_hint(ptr) -> int: Redis' and Valkey's jemalloc (je_get_defrag_hint)
    DefragHint1,
    // mozjemalloc's own (Firefox: memory/build/malloc_decls.h).
    /// moz_arena_malloc(arena, size)
    ArenaAlloc2,
    /// moz_arena_calloc(arena, count, size)
    ArenaCalloc3,
    /// moz_arena_realloc(arena, p, size)
    ArenaRealloc3,
    /// moz_arena_free(arena, p)
    ArenaFree2,
    /// moz_arena_memalign(arena, align, size)
    ArenaMemalign3,
    /// jemalloc_stats_lite(jemalloc_stats_lite_t*)
    MozStatsLite1,
    /// jemalloc_free_dirty_pages(), jemalloc_free_excess_dirty_pages()
    MozPurge0,
    // mimalloc's heaps and the rest of its allocating API (wrappers in mi_api.rs).
    /// mi_heap_new() -> heap
    MiHeapNew0,
    /// mi_heap_delete(heap): its blocks stay (the default heap's)
    MiHeapDelete1,
    /// mi_heap_destroy(heap): its blocks freed
    MiHeapDestroy1,
    /// mi_heap_set_default(heap) -> previous
    MiHeapSetDefault1,
    /// mi_heap_get_default() / mi_heap_get_backing() -> heap
    MiHeapGetDefault0,
    /// mi_heap_collect(heap, force)
    MiHeapCollect2,
    /// mi_heap_contains_block(heap, p) / mi_heap_check_owned(heap, p) -> bool
    MiHeapContains2,
    /// mi_heap_visit_blocks(heap, all, visitor, arg) -> bool
    MiHeapVisit4,
    /// mi_check_owned(p) -> bool
    MiCheckOwned1,
    /// mi_heap_malloc(heap, size)
    MiHeapAlloc2,
    /// mi_heap_zalloc(heap, size)
    MiHeapZalloc2,
    /// mi_heap_calloc(heap, count, size)
    MiHeapCalloc3,
    /// mi_heap_mallocn(heap, count, size)
    MiHeapMallocn3,
    /// mi_heap_realloc(heap, p, size)
    MiHeapRealloc3,
    /// mi_heap_reallocf(heap, p, size)
    MiHeapReallocf3,
    /// mi_heap_rezalloc(heap, p, size)
    MiHeapRezalloc3,
    /// mi_heap_reallocn(heap, p, count, size)
    MiHeapReallocn4,
    /// mi_heap_recalloc(heap, p, count, size)
    MiHeapRecalloc4,
    /// mi_heap_malloc_aligned_at(heap, size, align, offset) (offset 0: _aligned)
    MiHeapAllocAlignedAt4,
    /// mi_heap_zalloc_aligned_at(heap, size, align, offset)
    MiHeapZallocAlignedAt4,
    /// mi_heap_calloc_aligned_at(heap, count, size, align, offset)
    MiHeapCallocAlignedAt5,
    /// mi_heap_realloc_aligned_at(heap, p, size, align, offset)
    MiHeapReallocAlignedAt5,
    /// mi_heap_rezalloc_aligned_at(heap, p, size, align, offset)
    MiHeapRezallocAlignedAt5,
    /// mi_heap_recalloc_aligned_at(heap, p, count, size, align, offset)
    MiHeapRecallocAlignedAt6,
    /// mi_heap_malloc_aligned(heap, size, align)
    MiHeapAllocAligned3,
    /// mi_heap_zalloc_aligned(heap, size, align)
    MiHeapZallocAligned3,
    /// mi_heap_calloc_aligned(heap, count, size, align)
    MiHeapCallocAligned4,
    /// mi_heap_realloc_aligned(heap, p, size, align)
    MiHeapReallocAligned4,
    /// mi_heap_rezalloc_aligned(heap, p, size, align)
    MiHeapRezallocAligned4,
    /// mi_heap_recalloc_aligned(heap, p, count, size, align)
    MiHeapRecallocAligned5,
    /// mi_heap_strdup(heap, s)
    MiHeapStrdup2,
    /// mi_heap_strndup(heap, s, n)
    MiHeapStrndup3,
    /// mi_heap_realpath(heap, name, resolved)
    MiHeapRealpath3,
    /// mi_heap_new_in_arena(arena)
    MiHeapNewInArena1,
    /// mi_register_deferred_free(fn, arg): always the original's
    MiRegisterDeferredFree2,
    /// mi_rezalloc(p, size)
    MiRezalloc2,
    /// mi_recalloc(p, count, size)
    MiRecalloc3,
    /// mi_malloc_aligned_at(size, align, offset)
    MiAllocAlignedAt3,
    /// mi_zalloc_aligned_at(size, align, offset)
    MiZallocAlignedAt3,
    /// mi_calloc_aligned_at(count, size, align, offset)
    MiCallocAlignedAt4,
    /// mi_realloc_aligned_at(p, size, align, offset)
    MiReallocAlignedAt4,
    /// mi_rezalloc_aligned(p, size, align)
    MiRezallocAligned3,
    /// mi_rezalloc_aligned_at(p, size, align, offset)
    MiRezallocAlignedAt4,
    /// mi_recalloc_aligned(p, count, size, align)
    MiRecallocAligned4,
    /// mi_recalloc_aligned_at(p, count, size, align, offset)
    MiRecallocAlignedAt5,
    /// mi_strdup(s)
    MiStrdup1,
    /// mi_strndup(s, n)
    MiStrndup2,
    /// mi_realpath(name, resolved)
    MiRealpath2,
    /// mi_reallocarr(&p, count, size) -> int
    MiReallocarr3,
    /// mi_is_in_heap_region(p) -> bool
    MiInHeapRegion1,
}

pub const KINDS: usize = Kind::MiInHeapRegion1 as usize + 1;

use Kind::*;

/// The standard C names, as a library that replaces malloc defines them (and as jemalloc,
/// tcmalloc and mimalloc define them under their prefixes).
pub const STANDARD: &[(&str, Kind)] = &[
    ("malloc", Alloc1),
    ("calloc", Calloc2),
    ("realloc", Realloc2),
    ("free", Free1),
    ("cfree", Free1),
    ("posix_memalign", PosixMemalign3),
    ("aligned_alloc", AlignedAlloc2),
    ("memalign", Memalign2),
    ("valloc", Valloc1),
    ("pvalloc", Pvalloc1),
    ("malloc_usable_size", Usable1),
    ("reallocarray", Reallocarray3),
    ("free_sized", FreeSized2),
    ("free_aligned_sized", FreeAlignedSized3),
];

/// jemalloc's non-standard API (after its prefix).
pub const JEMALLOC: &[(&str, Kind)] = &[
    ("mallocx", Mallocx2),
    ("rallocx", Rallocx3),
    ("xallocx", Xallocx4),
    ("sallocx", Sallocx2),
    ("dallocx", Free2),
    ("sdallocx", FreeSized3),
    ("nallocx", Nallocx2),
    ("mallctl", Mallctl5),
    ("mallctlnametomib", Nametomib3),
    ("mallctlbymib", Bymib6),
    ("malloc_stats_print", StatsPrint3),
    ("get_defrag_hint", DefragHint1),
];

/// mozjemalloc's API beyond the standard names (Firefox's executable exports it for libxul):
/// the arena calls that hand out and take back blocks, the size query, and the statistics and
/// purges that describe or change the heap. Its other functions are left to it, patched or
/// switched alike: `jemalloc_stats_internal` (a layout that changes between versions: when
/// switched it describes the blocks mozjemalloc still holds), `jemalloc_ptr_info` (it answers
/// "unknown" for a block it did not make), `jemalloc_stats_num_bins`, and the controls of its
/// own arenas (`moz_create_arena_with_params`, `moz_dispose_arena`, `moz_may_purge_*`,
/// `moz_set_max_dirty_page_modifier`, `moz_enable_deferred_purge`,
/// `jemalloc_thread_local_arena`, `jemalloc_set_main_thread`,
/// `jemalloc_reset_small_alloc_randomization`, `jemalloc_purge_freed_pages`): an arena id it
/// made stays valid, its arenas just stay empty once switched.
pub const MOZJEMALLOC: &[(&str, Kind)] = &[
    ("malloc_good_size", GoodSize1),
    ("moz_arena_malloc", ArenaAlloc2),
    ("moz_arena_calloc", ArenaCalloc3),
    ("moz_arena_realloc", ArenaRealloc3),
    ("moz_arena_free", ArenaFree2),
    ("moz_arena_memalign", ArenaMemalign3),
    ("jemalloc_stats_lite", MozStatsLite1),
    ("jemalloc_free_dirty_pages", MozPurge0),
    ("jemalloc_free_excess_dirty_pages", MozPurge0),
];

/// mozjemalloc's functions that the shim knowingly leaves to it (see [`MOZJEMALLOC`]), and the
/// exported helpers of Firefox's executable that allocate only through the entry points
/// patched (mozalloc's `moz_x*`, its operators new and delete, strdup).
const MOZ_LEFT: &[&str] = &[
    "jemalloc_stats_internal",
    "jemalloc_stats_num_bins",
    "jemalloc_ptr_info",
    "jemalloc_purge_freed_pages",
    "jemalloc_thread_local_arena",
    "jemalloc_set_main_thread",
    "jemalloc_reset_small_alloc_randomization",
    "moz_create_arena_with_params",
    "moz_dispose_arena",
    "moz_set_max_dirty_page_modifier",
    "moz_enable_deferred_purge",
    "moz_may_purge_now",
    "moz_may_purge_one_now",
];

/// A mozjemalloc function the shim neither wraps nor knowingly leaves to it (one of a newer
/// version): a family that has one is recorded without it and is not switched.
pub fn mozjemalloc_unhandled(name: &str) -> bool {
    (name.starts_with("moz_arena_") || name.starts_with("jemalloc_"))
        && lookup(MOZJEMALLOC, "", name).is_none()
        && !MOZ_LEFT.contains(&name)
}

/// gperftools' tcmalloc (`tc_` names; the standard and C++ names are aliases of these).
pub const TCMALLOC: &[(&str, Kind)] = &[
    ("tc_malloc", Alloc1),
    ("tc_malloc_skip_new_handler", Alloc1),
    ("tc_free", Free1),
    ("tc_cfree", Free1),
    ("tc_free_sized", FreeSized2),
    ("tc_calloc", Calloc2),
    ("tc_realloc", Realloc2),
    ("tc_memalign", Memalign2),
    ("tc_posix_memalign", PosixMemalign3),
    ("tc_valloc", Valloc1),
    ("tc_pvalloc", Pvalloc1),
    ("tc_malloc_size", Usable1),
    ("tc_new", CxxNew1),
    ("tc_newarray", CxxNew1),
    ("tc_new_nothrow", CxxNewNothrow2),
    ("tc_newarray_nothrow", CxxNewNothrow2),
    ("tc_delete", Free1),
    ("tc_deletearray", Free1),
    ("tc_delete_sized", FreeSized2),
    ("tc_deletearray_sized", FreeSized2),
    ("tc_delete_nothrow", Free2),
    ("tc_deletearray_nothrow", Free2),
    ("tc_new_aligned", CxxNewAligned2),
    ("tc_newarray_aligned", CxxNewAligned2),
    ("tc_new_aligned_nothrow", CxxNewAlignedNothrow3),
    ("tc_newarray_aligned_nothrow", CxxNewAlignedNothrow3),
    ("tc_delete_aligned", Free2),
    ("tc_deletearray_aligned", Free2),
    ("tc_delete_sized_aligned", FreeSized3),
    ("tc_deletearray_sized_aligned", FreeSized3),
    ("tc_delete_aligned_nothrow", Free3),
    ("tc_deletearray_aligned_nothrow", Free3),
    ("tc_malloc_stats", TcMallocStats0),
    // MallocExtension's C API (malloc_extension_c.h): the statistics, and the calls that take
    // a block or a size, which must reach whoever serves the blocks.
    ("MallocExtension_GetNumericProperty", TcGetProperty2),
    ("MallocExtension_SetNumericProperty", TcSetProperty2),
    ("MallocExtension_GetStats", TcGetStats2),
    ("MallocExtension_ReleaseFreeMemory", TcRelease0),
    ("MallocExtension_ReleaseToSystem", TcReleaseToSystem1),
    ("MallocExtension_MarkThreadIdle", TcMarkIdle0),
    ("MallocExtension_GetAllocatedSize", Usable1),
    ("MallocExtension_GetEstimatedAllocatedSize", GoodSize1),
];

/// mimalloc's API as C programs and the Rust `mimalloc` crate call it.
pub const MIMALLOC: &[(&str, Kind)] = &[
    ("mi_malloc", Alloc1),
    ("mi_malloc_small", Alloc1),
    ("mi_zalloc", Zalloc1),
    ("mi_zalloc_small", Zalloc1),
    ("mi_calloc", Calloc2),
    ("mi_mallocn", Mallocn2),
    ("mi_realloc", Realloc2),
    ("mi_reallocf", Reallocf2),
    ("mi_expand", Expand2),
    ("mi_reallocn", Reallocarray3),
    ("mi_reallocarray", Reallocarray3),
    ("mi_free", Free1),
    ("mi_cfree", Free1),
    ("mi_free_size", FreeSized2),
    ("mi_free_aligned", Free2),
    ("mi_free_size_aligned", FreeSized3),
    ("mi_usable_size", Usable1),
    ("mi_malloc_usable_size", Usable1),
    ("mi_good_size", GoodSize1),
    ("mi_malloc_aligned", AllocAligned2),
    ("mi_zalloc_aligned", ZallocAligned2),
    ("mi_calloc_aligned", CallocAligned3),
    ("mi_realloc_aligned", ReallocAligned3),
    ("mi_posix_memalign", PosixMemalign3),
    ("mi_memalign", Memalign2),
    ("mi_aligned_alloc", AlignedAlloc2),
    ("mi_valloc", Valloc1),
    ("mi_pvalloc", Pvalloc1),
    ("mi_process_info", MiProcessInfo8),
    ("mi_stats_print_out", MiStatsPrintOut2),
    ("mi_stats_print", MiStatsPrint1),
    ("mi_stats_reset", MiStatsReset0),
    ("mi_stats_merge", MiStatsMerge0),
    ("mi_collect", MiCollect1),
    ("mi_thread_stats_print_out", MiStatsPrintOut2),
    ("mi_malloc_size", Usable1),
    ("mi_malloc_good_size", GoodSize1),
    // The heap API: a heap is emulated when switched (backend/src/emulate/mimalloc.rs).
    ("mi_heap_new", MiHeapNew0),
    ("mi_heap_delete", MiHeapDelete1),
    ("mi_heap_destroy", MiHeapDestroy1),
    ("mi_heap_set_default", MiHeapSetDefault1),
    ("mi_heap_get_default", MiHeapGetDefault0),
    ("mi_heap_get_backing", MiHeapGetDefault0),
    ("mi_heap_collect", MiHeapCollect2),
    ("mi_heap_contains_block", MiHeapContains2),
    ("mi_heap_check_owned", MiHeapContains2),
    ("mi_heap_visit_blocks", MiHeapVisit4),
    ("mi_check_owned", MiCheckOwned1),
    ("mi_is_in_heap_region", MiInHeapRegion1),
    ("mi_heap_malloc", MiHeapAlloc2),
    ("mi_heap_malloc_small", MiHeapAlloc2),
    ("mi_heap_zalloc", MiHeapZalloc2),
    ("mi_heap_calloc", MiHeapCalloc3),
    ("mi_heap_mallocn", MiHeapMallocn3),
    ("mi_heap_realloc", MiHeapRealloc3),
    ("mi_heap_reallocf", MiHeapReallocf3),
    ("mi_heap_rezalloc", MiHeapRezalloc3),
    ("mi_heap_reallocn", MiHeapReallocn4),
    ("mi_heap_recalloc", MiHeapRecalloc4),
    ("mi_heap_malloc_aligned", MiHeapAllocAligned3),
    ("mi_heap_malloc_aligned_at", MiHeapAllocAlignedAt4),
    ("mi_heap_zalloc_aligned", MiHeapZallocAligned3),
    ("mi_heap_zalloc_aligned_at", MiHeapZallocAlignedAt4),
    ("mi_heap_calloc_aligned", MiHeapCallocAligned4),
    ("mi_heap_calloc_aligned_at", MiHeapCallocAlignedAt5),
    ("mi_heap_realloc_aligned", MiHeapReallocAligned4),
    ("mi_heap_realloc_aligned_at", MiHeapReallocAlignedAt5),
    ("mi_heap_rezalloc_aligned", MiHeapRezallocAligned4),
    ("mi_heap_rezalloc_aligned_at", MiHeapRezallocAlignedAt5),
    ("mi_heap_recalloc_aligned", MiHeapRecallocAligned5),
    ("mi_heap_recalloc_aligned_at", MiHeapRecallocAlignedAt6),
    ("mi_heap_strdup", MiHeapStrdup2),
    ("mi_heap_strndup", MiHeapStrndup3),
    ("mi_heap_realpath", MiHeapRealpath3),
    ("mi_heap_new_in_arena", MiHeapNewInArena1),
    ("mi_heap_alloc_new", MiHeapAlloc2),
    ("mi_heap_alloc_new_n", MiHeapMallocn3),
    ("mi_register_deferred_free", MiRegisterDeferredFree2),
    ("mi__expand", Expand2),
    ("mi_rezalloc", MiRezalloc2),
    ("mi_recalloc", MiRecalloc3),
    ("mi_malloc_aligned_at", MiAllocAlignedAt3),
    ("mi_zalloc_aligned_at", MiZallocAlignedAt3),
    ("mi_calloc_aligned_at", MiCallocAlignedAt4),
    ("mi_realloc_aligned_at", MiReallocAlignedAt4),
    ("mi_rezalloc_aligned", MiRezallocAligned3),
    ("mi_rezalloc_aligned_at", MiRezallocAlignedAt4),
    ("mi_recalloc_aligned", MiRecallocAligned4),
    ("mi_aligned_recalloc", MiRecallocAligned4),
    ("mi_recalloc_aligned_at", MiRecallocAlignedAt5),
    ("mi_aligned_offset_recalloc", MiRecallocAlignedAt5),
    ("mi_strdup", MiStrdup1),
    ("mi_strndup", MiStrndup2),
    ("mi_realpath", MiRealpath2),
    ("mi_reallocarr", MiReallocarr3),
    // The C++ entry points: mi_new* throw std::bad_alloc as operator new does.
    ("mi_new", CxxNew1),
    ("mi_new_nothrow", Alloc1),
    ("mi_new_aligned", CxxNewAligned2),
    ("mi_new_aligned_nothrow", AllocAligned2),
    ("mi_new_n", Mallocn2),
    ("mi_new_realloc", Realloc2),
    ("mi_new_reallocn", Reallocarray3),
];

/// The C++ allocation operators (Itanium names), part of an allocator that defines them
/// beside malloc in the same file.
pub const CXX: &[(&str, Kind)] = &[
    ("_Znwm", CxxNew1),
    ("_Znam", CxxNew1),
    ("_ZnwmRKSt9nothrow_t", CxxNewNothrow2),
    ("_ZnamRKSt9nothrow_t", CxxNewNothrow2),
    ("_ZnwmSt11align_val_t", CxxNewAligned2),
    ("_ZnamSt11align_val_t", CxxNewAligned2),
    ("_ZnwmSt11align_val_tRKSt9nothrow_t", CxxNewAlignedNothrow3),
    ("_ZnamSt11align_val_tRKSt9nothrow_t", CxxNewAlignedNothrow3),
    ("_ZdlPv", Free1),
    ("_ZdaPv", Free1),
    ("_ZdlPvm", FreeSized2),
    ("_ZdaPvm", FreeSized2),
    ("_ZdlPvRKSt9nothrow_t", Free2),
    ("_ZdaPvRKSt9nothrow_t", Free2),
    ("_ZdlPvSt11align_val_t", Free2),
    ("_ZdaPvSt11align_val_t", Free2),
    ("_ZdlPvmSt11align_val_t", FreeSized3),
    ("_ZdaPvmSt11align_val_t", FreeSized3),
    ("_ZdlPvSt11align_val_tRKSt9nothrow_t", Free3),
    ("_ZdaPvSt11align_val_tRKSt9nothrow_t", Free3),
];

/// Looks `name` up in `table` after stripping `prefix`.
pub fn lookup(table: &[(&str, Kind)], prefix: &str, name: &str) -> Option<Kind> {
    let rest = name.strip_prefix(prefix)?;
    table.iter().find(|(n, _)| *n == rest).map(|&(_, k)| k)
}

/// A mimalloc function that hands out or takes back blocks but has no wrapper here (its
/// heap API, strdup and the like): a family that has one is recorded without it and is
/// not switched (its blocks would reach the backend's free).
pub fn mimalloc_unhandled(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("mi_") else { return false };
    lookup(MIMALLOC, "", name).is_none()
        && ["alloc", "new", "strdup", "strndup", "realpath", "expand", "free", "heap_destroy", "heap_delete"]
            .iter()
            .any(|w| rest.contains(w))
}

/// Whether two names at one address can share its wrapper: the same kind, or memalign and
/// aligned_alloc (gperftools makes one the alias of the other; they differ only in which
/// arguments glibc rejects).
pub fn same_meaning(a: Kind, b: Kind) -> bool {
    a == b || matches!((a, b), (AlignedAlloc2, Memalign2) | (Memalign2, AlignedAlloc2))
}
