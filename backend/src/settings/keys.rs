//! Each allocator's settings: their names, what a value must look like, an example, what
//! each does, and how it is set (an option id, or start-up only).

/// What a value must look like.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// `true`/`false` (also `1`/`0`).
    Bool,
    /// A whole number in `[min, max]`.
    Int { min: i64, max: i64 },
    /// A real number in `[min, max]`.
    Float { min: f64, max: f64 },
    /// One of these words.
    Choice(&'static [&'static str]),
}

/// One setting an allocator knows.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    pub name: &'static str,
    pub kind: Kind,
    /// A value that changes something (docs, tests).
    pub example: &'static str,
    /// What it does, in a few words.
    pub what: &'static str,
    /// For a time-driven setting (decay, purge delays): its unit, "ms".
    pub timed: bool,
    /// The allocator's own id (mi_option, mallopt parameter, tcmalloc property index).
    pub(super) id: i32,
    /// Only at process start (GLIBC_TUNABLES): a replay's child can, the shim cannot.
    pub(super) start_only: bool,
}

const fn k(name: &'static str, kind: Kind, example: &'static str, what: &'static str) -> Key {
    Key { name, kind, example, what, timed: false, id: 0, start_only: false }
}
const fn kt(name: &'static str, kind: Kind, example: &'static str, what: &'static str) -> Key {
    Key { name, kind, example, what, timed: true, id: 0, start_only: false }
}
const fn ki(name: &'static str, kind: Kind, example: &'static str, what: &'static str, id: i32) -> Key {
    Key { name, kind, example, what, timed: false, id, start_only: false }
}

const B: Kind = Kind::Bool;
const U: Kind = Kind::Int { min: 0, max: i64::MAX };
const DECAY: Kind = Kind::Int { min: -1, max: i64::MAX };

/// jemalloc 5.3's `malloc_conf` options (those this build has: no profiling, no utrace),
/// except `background_thread`: its threads would be made through the program's
/// pthread_create while the shim starts.
pub const JEMALLOC: &[Key] = &[
    kt(
        "dirty_decay_ms",
        DECAY,
        "0",
        "dirty pages purged after this long unused (-1: never, 0: at once); default 10000",
    ),
    kt("muzzy_decay_ms", DECAY, "0", "muzzy (lazily purged) pages released after this long; default 0"),
    k("narenas", Kind::Int { min: 1, max: 1 << 20 }, "1", "arenas (default 4 per CPU)"),
    k(
        "percpu_arena",
        Kind::Choice(&["disabled", "percpu", "phycpu"]),
        "percpu",
        "one arena per CPU instead of per thread",
    ),
    k("tcache", B, "false", "thread caches on or off"),
    k("tcache_max", U, "4096", "largest size class kept in thread caches (bytes)"),
    k("lg_tcache_max", Kind::Int { min: 0, max: 63 }, "12", "log2 of tcache_max (older spelling)"),
    k("tcache_nslots_small_min", U, "4", "fewest cached objects per small class"),
    k("tcache_nslots_small_max", U, "64", "most cached objects per small class"),
    k("tcache_nslots_large", U, "10", "cached objects per large class"),
    k(
        "lg_tcache_nslots_mul",
        Kind::Int { min: -16, max: 16 },
        "0",
        "log2 multiplier of cached objects per class",
    ),
    k("tcache_gc_incr_bytes", U, "16384", "bytes allocated between thread-cache garbage collections"),
    k("tcache_gc_delay_bytes", U, "0", "bytes before a refilled bin may be collected again"),
    k(
        "lg_tcache_flush_small_div",
        Kind::Int { min: 1, max: 16 },
        "2",
        "flush 1/2^N of a small bin when full",
    ),
    k(
        "lg_tcache_flush_large_div",
        Kind::Int { min: 1, max: 16 },
        "2",
        "flush 1/2^N of a large bin when full",
    ),
    k("oversize_threshold", U, "0", "requests at least this large get their own arena (bytes)"),
    k("retain", B, "false", "keep unused virtual memory mapped (retained) rather than unmapping it"),
    k(
        "dss",
        Kind::Choice(&["disabled", "primary", "secondary"]),
        "primary",
        "use sbrk, before or after mmap",
    ),
    k("thp", Kind::Choice(&["default", "always", "never"]), "never", "transparent huge pages for the heap"),
    k(
        "metadata_thp",
        Kind::Choice(&["disabled", "auto", "always"]),
        "auto",
        "transparent huge pages for metadata",
    ),
    k(
        "lg_extent_max_active_fit",
        Kind::Int { min: 0, max: 63 },
        "6",
        "largest ratio (log2) of a reused extent to the request",
    ),
    k("cache_oblivious", B, "false", "randomise large allocations' offset within their page"),
    k("hpa", B, "true", "the huge-page allocator (experimental)"),
    k("zero", B, "true", "zero every allocation"),
    k(
        "junk",
        Kind::Choice(&["true", "false", "alloc", "free"]),
        "free",
        "fill allocations or freed memory with junk",
    ),
    k("abort_conf", B, "true", "abort on an invalid option"),
    k("confirm_conf", B, "true", "print the options in force at start"),
    k("stats_print", B, "true", "print statistics at exit"),
];

// mi_option_t of mimalloc 3.3 (include/mimalloc.h).
const MI_PURGE_DELAY: i32 = 15;
/// mimalloc 3.3's options (`mi_option_*`, named as its MIMALLOC_* variables without the prefix).
pub const MIMALLOC: &[Key] = &[
    Key {
        timed: true,
        ..ki(
            "purge_delay",
            DECAY,
            "0",
            "purge unused memory after this many ms (-1: never, 0: at once); default 1000",
            MI_PURGE_DELAY,
        )
    },
    ki("arena_purge_mult", U, "1", "multiplier of purge_delay for arenas (default 10)", 24),
    ki("purge_decommits", B, "false", "purge by decommit (true) or by reset (MADV_FREE)", 5),
    ki(
        "arena_eager_commit",
        Kind::Int { min: 0, max: 2 },
        "0",
        "commit arenas at once (2: only where the system overcommits)",
        4,
    ),
    ki("allow_large_os_pages", B, "true", "use 2 MiB OS pages", 6),
    ki("allow_thp", B, "false", "allow transparent huge pages", 43),
    ki("reserve_huge_os_pages", U, "1", "reserve N 1 GiB pages at start", 7),
    ki("reserve_os_memory", U, "65536", "reserve this much OS memory at start (KiB)", 9),
    ki("arena_reserve", U, "65536", "size of each arena reservation (KiB; default 1 GiB)", 23),
    ki("use_numa_nodes", U, "1", "use at most N NUMA nodes (0: all)", 16),
    ki("minimal_purge_size", U, "64", "smallest purge (KiB)", 44),
    ki("generic_collect", U, "1000", "collect heaps every N generic allocations (default 10000)", 34),
    ki(
        "page_reclaim_on_free",
        Kind::Int { min: -1, max: 1 },
        "1",
        "reclaim abandoned pages on a free (-1 never, 0 own heap's, 1 always)",
        35,
    ),
    ki(
        "page_full_retain",
        Kind::Int { min: -1, max: 1 << 20 },
        "0",
        "full small pages retained per size class (default 2)",
        36,
    ),
    ki("page_max_candidates", U, "8", "candidate pages considered per allocation (default 4)", 37),
    ki("page_commit_on_demand", Kind::Int { min: 0, max: 2 }, "1", "commit page memory on demand", 40),
    ki(
        "page_max_reclaim",
        Kind::Int { min: -1, max: i64::MAX },
        "8",
        "pages of a heap reclaimed per size class (-1: unlimited)",
        41,
    ),
    ki(
        "page_cross_thread_max_reclaim",
        Kind::Int { min: -1, max: i64::MAX },
        "4",
        "pages reclaimed across threads per size class (default 16)",
        42,
    ),
    ki("show_stats", B, "true", "print statistics at exit", 1),
    ki("verbose", B, "true", "print what mimalloc does", 2),
];

pub(super) const TC_RELEASE_RATE: i32 = 0;
pub(super) const TC_THREAD_CACHE: i32 = 1;
pub(super) const TC_DECOMMIT: i32 = 2;
/// gperftools' tcmalloc 2.10: its TCMALLOC_* variables that can be set on a running tcmalloc.
pub const TCMALLOC: &[Key] = &[
    ki(
        "release_rate",
        Kind::Float { min: 0.0, max: 10.0 },
        "10",
        "how fast freed pages go back to the OS (0: never; default 1)",
        TC_RELEASE_RATE,
    ),
    ki(
        "max_total_thread_cache_bytes",
        U,
        "1048576",
        "all thread caches together (bytes; default 32 MiB)",
        TC_THREAD_CACHE,
    ),
    ki("aggressive_decommit", B, "true", "decommit free spans at once", TC_DECOMMIT),
];

// mallopt parameters (malloc.h).
const M_TRIM_THRESHOLD: i32 = -1;
const M_TOP_PAD: i32 = -2;
const M_MMAP_THRESHOLD: i32 = -3;
const M_MMAP_MAX: i32 = -4;
const M_ARENA_TEST: i32 = -7;
const M_ARENA_MAX: i32 = -8;
const I32: Kind = Kind::Int { min: 0, max: i32::MAX as i64 };
/// glibc's malloc tunables: `mallopt`'s, and the tcache's (start-up only).
pub const GLIBC: &[Key] = &[
    ki(
        "arena_max",
        Kind::Int { min: 1, max: i32::MAX as i64 },
        "2",
        "most arenas (default 8 per CPU)",
        M_ARENA_MAX,
    ),
    ki(
        "arena_test",
        Kind::Int { min: 1, max: i32::MAX as i64 },
        "1",
        "arenas made before arena_max is checked",
        M_ARENA_TEST,
    ),
    ki(
        "trim_threshold",
        I32,
        "131072",
        "free memory at the heap's top kept before trimming (bytes)",
        M_TRIM_THRESHOLD,
    ),
    ki("top_pad", I32, "0", "extra bytes asked of sbrk each time (default 128 KiB)", M_TOP_PAD),
    ki(
        "mmap_threshold",
        Kind::Int { min: 0, max: 32 << 20 },
        "65536",
        "requests this large are mmapped (fixes the otherwise sliding threshold)",
        M_MMAP_THRESHOLD,
    ),
    ki("mmap_max", I32, "0", "most mmapped chunks at once (0: no mmap)", M_MMAP_MAX),
    Key {
        start_only: true,
        ..k(
            "tcache_count",
            Kind::Int { min: 0, max: 65535 },
            "0",
            "chunks per tcache bin (0: no tcache; default 7)",
        )
    },
    Key {
        start_only: true,
        ..k(
            "tcache_max",
            Kind::Int { min: 0, max: 4 << 20 },
            "0",
            "largest size the tcache keeps (bytes; default 1032)",
        )
    },
    Key {
        start_only: true,
        ..k("tcache_unsorted_limit", U, "0", "unsorted chunks looked at when taking from the tcache")
    },
];
