//! jemalloc's `mallctl` namespace (jemalloc 5.3.0), answered from another backend's
//! statistics: `mallctl`, `mallctlnametomib`, `mallctlbymib` and `malloc_stats_print` with
//! jemalloc's calling conventions, as its src/ctl.c has them.
//!
//! - The tree is ctl.c's, node for node and in its order (so that a MIB is the one jemalloc
//!   gives): every name a jemalloc 5.3.0 built with its defaults answers (statistics on,
//!   profiling, utrace, xmalloc and UAF detection off) is answered with the same type and
//!   size; a name such a build does not answer is found (mallctlnametomib succeeds) and is
//!   ENOENT, as ctl.c's guards make it. jemalloc-5.3.0-ctl.txt, beside this file, lists
//!   every leaf of ctl.c with its MIB (tools/jemalloc-ctl-names.py reads ctl.c); the tests
//!   check this tree against it.
//! - A name is looked up element by element; a name that is not in the tree, stops at an
//!   inner node, has elements past a leaf, or an index the node's index function refuses
//!   (an arena that does not exist, a bin past `arenas.nbins`) is ENOENT; a MIB buffer
//!   shorter than the name gets the partial MIB.
//! - Each leaf checks its buffers as its ctl function does: READONLY (a write is EPERM),
//!   READ (a read with `*oldlenp` not the value's size copies what fits, sets `*oldlenp` to
//!   it and is EINVAL), VERIFY_READ (EINVAL and `*oldlenp` 0), WRITE (a write of the wrong
//!   size is EINVAL), NEITHER_READ_NOR_WRITE (an action given a buffer is EPERM).
//! - Statistics are a snapshot refreshed by writing `epoch`, as jemalloc's are.
//!
//! The serving backend is shown as one arena: `arenas.narenas` is 1, and arena 0 and
//! `MALLCTL_ARENAS_ALL` (4096) both hold everything. Structural values (size classes, bins,
//! slabs) are jemalloc's own for x86-64 (jemalloc_sc.rs); the figures come from the serving
//! backend where it keeps them, and are zeros that stay consistent where it does not (no
//! backend keeps jemalloc's per-bin counts: every bin is empty, and the whole heap is in
//! `large.allocated`). What each name returns under each backend is in
//! docs/introspection.md.
use super::jemalloc_sc::{self as sc, PAGE};
use super::{say_once, snapshot, Buf, Snapshot, Trouble};
use crate::Backend;
use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicIsize, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use libc::{EAGAIN, EFAULT, EINVAL, ENOENT, EPERM};

/// `MALLCTL_ARENAS_ALL`: the arena index that means all arenas merged.
pub const ARENAS_ALL: usize = 4096;
/// `MALLCTL_ARENAS_DESTROYED`.
pub const ARENAS_DESTROYED: usize = 4097;
/// The arenas shown: one, the whole backend.
pub const NARENAS: u32 = 1;
/// jemalloc's CTL_MAX_DEPTH.
const MAX_DEPTH: usize = 7;
/// jemalloc's dss_prec_names.
const DSS_NAMES: [&CStr; 3] = [c"disabled", c"primary", c"secondary"];
/// The defaults of `arena.<i>.dirty_decay_ms`, `muzzy_decay_ms` and `oversize_threshold`.
const DIRTY_DECAY_MS: isize = 10_000;
const MUZZY_DECAY_MS: isize = 0;
const OVERSIZE_THRESHOLD: usize = 8 << 20;
/// opt.max_background_threads's default.
const MAX_BACKGROUND_THREADS: usize = 4;
/// The explicit thread caches `tcache.create` hands out (MALLOCX_TCACHE_MAX).
const TCACHES_MAX: u32 = (1 << 12) - 3;

/// A statistic of `stats.*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stat {
    Allocated,
    Active,
    Metadata,
    Resident,
    Mapped,
    Retained,
}

/// A figure of `stats.arenas.<i>.*` (arena 0 and all arenas merged are the same arena).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fig {
    Pactive,
    Pdirty,
    Pmuzzy,
    Mapped,
    Retained,
    Base,
    Resident,
    LargeAllocated,
    Nthreads,
    Uptime,
    Dss,
    DirtyDecayMs,
    MuzzyDecayMs,
}

/// What a read-only leaf reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// The same under every backend.
    Const(Value),
    Version,
    OptDss,
    Narenas,
    Stat(Stat),
    Arena(Fig),
    /// `arenas.bin.<i>.*` (index mib[2]).
    BinSize,
    BinNregs,
    BinSlabSize,
    BinNshards,
    /// `arenas.lextent.<i>.size`.
    LextentSize,
    /// `thread.allocatedp`, `thread.deallocatedp`: where the counter is kept.
    CounterP,
}

/// What a leaf does: a read-only value, or the ctl function of its own that ctl.c has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctl {
    Ro(Read),
    /// Not in the build answered (its guard is false there: profiling, utrace, xmalloc,
    /// UAF detection): ENOENT.
    Absent,
    Epoch,
    BackgroundThread,
    MaxBackgroundThreads,
    ThreadArena,
    ThreadTcacheEnabled,
    ThreadTcacheFlush,
    ThreadPeakReset,
    ThreadIdle,
    TcacheCreate,
    TcacheFlushOrDestroy,
    ArenaInitialized,
    ArenaDecay,
    ArenaPurge,
    ArenaResetOrDestroy,
    ArenaDss,
    /// `arena.<i>.oversize_threshold`, `dirty_decay_ms`, `muzzy_decay_ms`.
    ArenaSetting(Setting),
    ArenaExtentHooks,
    ArenaRetainGrowLimit,
    /// `arenas.dirty_decay_ms` (true), `arenas.muzzy_decay_ms`.
    ArenasDecayMs(bool),
    ArenasCreate,
    ArenasLookup,
    StatsMutexesReset,
    HooksInstall,
    HooksRemove,
    /// `experimental.hooks.prof_backtrace` and `prof_dump`.
    HooksProf,
    HooksSafetyCheckAbort,
    UtilizationQuery,
    UtilizationBatchQuery,
    PactiveP,
    ArenasCreateExt,
    BatchAlloc,
    ActivityCallback,
}

/// An arena's setting that the backend keeps at jemalloc's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    OversizeThreshold,
    DirtyDecayMs,
    MuzzyDecayMs,
}

/// Which indices an indexed node takes (its index function in ctl.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Index {
    /// `arena.<i>`: up to `narenas`, all, destroyed (arena_i_index).
    Arena,
    /// `stats.arenas.<i>`, `experimental.arenas.<i>`: the arenas that exist, and all
    /// (ctl_arenas_i_verify; the destroyed arenas' merged statistics exist once one was).
    StatsArena,
    /// `arenas.bin.<i>`, `stats.arenas.<i>.bins.<j>`: up to SC_NBINS, that one included.
    Bin,
    /// `arenas.lextent.<i>`, `stats.arenas.<i>.lextents.<j>`: up to SC_NSIZES - SC_NBINS.
    Lextent,
    /// `stats.arenas.<i>.extents.<j>`: below SC_NPSIZES.
    Extent,
    /// `stats.arenas.<i>.hpa_shard.nonfull_slabs.<j>`: below PSSET_NPSIZES.
    HpaNonfull,
    /// `prof.stats.bins.<i>`, `prof.stats.lextents.<i>`: none without profiling.
    Never,
}

impl Index {
    fn valid(self, i: usize) -> bool {
        match self {
            Index::Arena => i <= NARENAS as usize || i == ARENAS_ALL || i == ARENAS_DESTROYED,
            Index::StatsArena => i < NARENAS as usize || i == ARENAS_ALL,
            Index::Bin => i <= sc::NBINS,
            Index::Lextent => i <= sc::NLEXTENTS,
            Index::Extent => i < sc::NPSIZES,
            Index::HpaNonfull => i < sc::PSSET_NPSIZES,
            Index::Never => false,
        }
    }
}

enum Node {
    Named(&'static [(&'static str, Node)]),
    Indexed(Index, &'static Node),
    Leaf(Ctl),
}

use Ctl::*;
use Node::{Indexed, Leaf, Named};

const fn ro(r: Read) -> Node {
    Leaf(Ro(r))
}
const fn bool_(v: bool) -> Node {
    ro(Read::Const(Value::Bool(v)))
}
const fn u32_(v: u32) -> Node {
    ro(Read::Const(Value::Unsigned(v)))
}
const fn u64_(v: u64) -> Node {
    ro(Read::Const(Value::U64(v)))
}
const fn size(v: usize) -> Node {
    ro(Read::Const(Value::Size(v)))
}
const fn ssize(v: isize) -> Node {
    ro(Read::Const(Value::Ssize(v)))
}
const fn str_(v: &'static CStr) -> Node {
    ro(Read::Const(Value::Str(v)))
}
const fn arena(f: Fig) -> Node {
    ro(Read::Arena(f))
}
const ABSENT: Node = Leaf(Absent);

/// The statistics of one mutex (MUTEX_PROF_DATA_NODE): none kept, all 0.
const MUTEX: Node = Named(&[
    ("num_ops", u64_(0)),
    ("num_wait", u64_(0)),
    ("num_spin_acq", u64_(0)),
    ("num_owner_switch", u64_(0)),
    ("total_wait_time", u64_(0)),
    ("max_wait_time", u64_(0)),
    ("max_num_thds", u32_(0)),
]);

/// HPA slab statistics (hpa_shard.full_slabs, .empty_slabs, .nonfull_slabs.<j>): no HPA.
const HPA_SLABS: Node = Named(&[
    ("npageslabs_nonhuge", size(0)),
    ("npageslabs_huge", size(0)),
    ("nactive_nonhuge", size(0)),
    ("nactive_huge", size(0)),
    ("ndirty_nonhuge", size(0)),
    ("ndirty_huge", size(0)),
]);

/// The names answered: ctl.c's tree (its root_node and every node under it, in its order).
static ROOT: Node = Named(&[
    ("version", ro(Read::Version)),
    ("epoch", Leaf(Epoch)),
    ("background_thread", Leaf(BackgroundThread)),
    ("max_background_threads", Leaf(MaxBackgroundThreads)),
    (
        "thread",
        Named(&[
            ("arena", Leaf(ThreadArena)),
            ("allocated", u64_(0)),
            ("allocatedp", ro(Read::CounterP)),
            ("deallocated", u64_(0)),
            ("deallocatedp", ro(Read::CounterP)),
            ("tcache", Named(&[("enabled", Leaf(ThreadTcacheEnabled)), ("flush", Leaf(ThreadTcacheFlush))])),
            ("peak", Named(&[("read", u64_(0)), ("reset", Leaf(ThreadPeakReset))])),
            ("prof", Named(&[("name", ABSENT), ("active", ABSENT)])),
            ("idle", Leaf(ThreadIdle)),
        ]),
    ),
    (
        "config",
        Named(&[
            ("cache_oblivious", bool_(true)),
            ("debug", bool_(false)),
            ("fill", bool_(true)),
            ("lazy_lock", bool_(false)),
            ("malloc_conf", str_(c"")),
            ("opt_safety_checks", bool_(false)),
            ("prof", bool_(false)),
            ("prof_libgcc", bool_(false)),
            ("prof_libunwind", bool_(false)),
            ("stats", bool_(true)),
            ("utrace", bool_(false)),
            ("xmalloc", bool_(false)),
        ]),
    ),
    (
        "opt",
        Named(&[
            ("abort", bool_(false)),
            ("abort_conf", bool_(false)),
            ("cache_oblivious", bool_(true)),
            ("trust_madvise", bool_(false)),
            ("confirm_conf", bool_(false)),
            ("hpa", bool_(false)),
            ("hpa_slab_max_alloc", size(64 << 10)),
            ("hpa_hugification_threshold", size(1_992_294)),
            ("hpa_hugify_delay_ms", u64_(10_000)),
            ("hpa_min_purge_interval_ms", u64_(5_000)),
            // fxp_t, 16.16 fixed point: 0.25.
            ("hpa_dirty_mult", u32_(1 << 14)),
            ("hpa_sec_nshards", size(4)),
            ("hpa_sec_max_alloc", size(32 << 10)),
            ("hpa_sec_max_bytes", size(256 << 10)),
            ("hpa_sec_bytes_after_flush", size(128 << 10)),
            ("hpa_sec_batch_fill_extra", size(0)),
            ("metadata_thp", str_(c"disabled")),
            ("retain", bool_(true)),
            ("dss", ro(Read::OptDss)),
            ("narenas", ro(Read::Narenas)),
            ("percpu_arena", str_(c"disabled")),
            ("oversize_threshold", size(OVERSIZE_THRESHOLD)),
            ("mutex_max_spin", ro(Read::Const(Value::I64(600)))),
            ("background_thread", bool_(false)),
            ("max_background_threads", size(MAX_BACKGROUND_THREADS)),
            ("dirty_decay_ms", ssize(DIRTY_DECAY_MS)),
            ("muzzy_decay_ms", ssize(MUZZY_DECAY_MS)),
            ("stats_print", bool_(false)),
            ("stats_print_opts", str_(c"")),
            ("stats_interval", ro(Read::Const(Value::I64(-1)))),
            ("stats_interval_opts", str_(c"")),
            ("junk", str_(c"false")),
            ("zero", bool_(false)),
            ("utrace", ABSENT),
            ("xmalloc", ABSENT),
            ("experimental_infallible_new", bool_(false)),
            ("tcache", bool_(true)),
            ("tcache_max", size(sc::TCACHE_MAX)),
            ("tcache_nslots_small_min", u32_(20)),
            ("tcache_nslots_small_max", u32_(200)),
            ("tcache_nslots_large", u32_(20)),
            ("lg_tcache_nslots_mul", ssize(1)),
            ("tcache_gc_incr_bytes", size(64 << 10)),
            ("tcache_gc_delay_bytes", size(0)),
            ("lg_tcache_flush_small_div", u32_(1)),
            ("lg_tcache_flush_large_div", u32_(1)),
            ("thp", str_(c"default")),
            ("lg_extent_max_active_fit", size(6)),
            ("prof", ABSENT),
            ("prof_prefix", ABSENT),
            ("prof_active", ABSENT),
            ("prof_thread_active_init", ABSENT),
            ("lg_prof_sample", ABSENT),
            ("lg_prof_interval", ABSENT),
            ("prof_gdump", ABSENT),
            ("prof_final", ABSENT),
            ("prof_leak", ABSENT),
            ("prof_leak_error", ABSENT),
            ("prof_accum", ABSENT),
            ("prof_recent_alloc_max", ABSENT),
            ("prof_stats", ABSENT),
            ("prof_sys_thread_name", ABSENT),
            ("prof_time_resolution", ABSENT),
            ("lg_san_uaf_align", ABSENT),
            ("zero_realloc", str_(c"free")),
        ]),
    ),
    (
        "tcache",
        Named(&[
            ("create", Leaf(TcacheCreate)),
            ("flush", Leaf(TcacheFlushOrDestroy)),
            ("destroy", Leaf(TcacheFlushOrDestroy)),
        ]),
    ),
    (
        "arena",
        Indexed(
            Index::Arena,
            &Named(&[
                ("initialized", Leaf(ArenaInitialized)),
                ("decay", Leaf(ArenaDecay)),
                ("purge", Leaf(ArenaPurge)),
                ("reset", Leaf(ArenaResetOrDestroy)),
                ("destroy", Leaf(ArenaResetOrDestroy)),
                ("dss", Leaf(ArenaDss)),
                ("oversize_threshold", Leaf(ArenaSetting(Setting::OversizeThreshold))),
                ("dirty_decay_ms", Leaf(ArenaSetting(Setting::DirtyDecayMs))),
                ("muzzy_decay_ms", Leaf(ArenaSetting(Setting::MuzzyDecayMs))),
                ("extent_hooks", Leaf(ArenaExtentHooks)),
                ("retain_grow_limit", Leaf(ArenaRetainGrowLimit)),
            ]),
        ),
    ),
    (
        "arenas",
        Named(&[
            ("narenas", ro(Read::Narenas)),
            ("dirty_decay_ms", Leaf(ArenasDecayMs(true))),
            ("muzzy_decay_ms", Leaf(ArenasDecayMs(false))),
            ("quantum", size(sc::QUANTUM)),
            ("page", size(PAGE)),
            ("tcache_max", size(sc::TCACHE_MAX)),
            ("nbins", u32_(sc::NBINS as u32)),
            ("nhbins", u32_(sc::NHBINS as u32)),
            (
                "bin",
                Indexed(
                    Index::Bin,
                    &Named(&[
                        ("size", ro(Read::BinSize)),
                        ("nregs", ro(Read::BinNregs)),
                        ("slab_size", ro(Read::BinSlabSize)),
                        ("nshards", ro(Read::BinNshards)),
                    ]),
                ),
            ),
            ("nlextents", u32_(sc::NLEXTENTS as u32)),
            ("lextent", Indexed(Index::Lextent, &Named(&[("size", ro(Read::LextentSize))]))),
            ("create", Leaf(ArenasCreate)),
            ("lookup", Leaf(ArenasLookup)),
        ]),
    ),
    (
        "prof",
        Named(&[
            ("thread_active_init", ABSENT),
            ("active", ABSENT),
            ("dump", ABSENT),
            ("gdump", ABSENT),
            ("prefix", ABSENT),
            ("reset", ABSENT),
            ("interval", ABSENT),
            ("lg_sample", ABSENT),
            ("log_start", ABSENT),
            ("log_stop", ABSENT),
            (
                "stats",
                Named(&[
                    ("bins", Indexed(Index::Never, &Named(&[("live", ABSENT), ("accum", ABSENT)]))),
                    ("lextents", Indexed(Index::Never, &Named(&[("live", ABSENT), ("accum", ABSENT)]))),
                ]),
            ),
        ]),
    ),
    (
        "stats",
        Named(&[
            ("allocated", ro(Read::Stat(Stat::Allocated))),
            ("active", ro(Read::Stat(Stat::Active))),
            ("metadata", ro(Read::Stat(Stat::Metadata))),
            ("metadata_thp", size(0)),
            ("resident", ro(Read::Stat(Stat::Resident))),
            ("mapped", ro(Read::Stat(Stat::Mapped))),
            ("retained", ro(Read::Stat(Stat::Retained))),
            (
                "background_thread",
                Named(&[("num_threads", size(0)), ("num_runs", u64_(0)), ("run_interval", u64_(0))]),
            ),
            (
                "mutexes",
                Named(&[
                    ("background_thread", MUTEX),
                    ("max_per_bg_thd", MUTEX),
                    ("ctl", MUTEX),
                    ("prof", MUTEX),
                    ("prof_thds_data", MUTEX),
                    ("prof_dump", MUTEX),
                    ("prof_recent_alloc", MUTEX),
                    ("prof_recent_dump", MUTEX),
                    ("prof_stats", MUTEX),
                    ("reset", Leaf(StatsMutexesReset)),
                ]),
            ),
            ("arenas", Indexed(Index::StatsArena, &STATS_ARENA)),
            ("zero_reallocs", size(0)),
        ]),
    ),
    (
        "experimental",
        Named(&[
            (
                "hooks",
                Named(&[
                    ("install", Leaf(HooksInstall)),
                    ("remove", Leaf(HooksRemove)),
                    ("prof_backtrace", Leaf(HooksProf)),
                    ("prof_dump", Leaf(HooksProf)),
                    ("safety_check_abort", Leaf(HooksSafetyCheckAbort)),
                ]),
            ),
            (
                "utilization",
                Named(&[("query", Leaf(UtilizationQuery)), ("batch_query", Leaf(UtilizationBatchQuery))]),
            ),
            ("arenas", Indexed(Index::StatsArena, &Named(&[("pactivep", Leaf(PactiveP))]))),
            ("arenas_create_ext", Leaf(ArenasCreateExt)),
            ("prof_recent", Named(&[("alloc_max", ABSENT), ("alloc_dump", ABSENT)])),
            ("batch_alloc", Leaf(BatchAlloc)),
            ("thread", Named(&[("activity_callback", Leaf(ActivityCallback))])),
        ]),
    ),
]);

/// `stats.arenas.<i>`.
static STATS_ARENA: Node = Named(&[
    ("nthreads", arena(Fig::Nthreads)),
    ("uptime", arena(Fig::Uptime)),
    ("dss", arena(Fig::Dss)),
    ("dirty_decay_ms", arena(Fig::DirtyDecayMs)),
    ("muzzy_decay_ms", arena(Fig::MuzzyDecayMs)),
    ("pactive", arena(Fig::Pactive)),
    ("pdirty", arena(Fig::Pdirty)),
    ("pmuzzy", arena(Fig::Pmuzzy)),
    ("mapped", arena(Fig::Mapped)),
    ("retained", arena(Fig::Retained)),
    ("extent_avail", size(0)),
    ("dirty_npurge", u64_(0)),
    ("dirty_nmadvise", u64_(0)),
    ("dirty_purged", u64_(0)),
    ("muzzy_npurge", u64_(0)),
    ("muzzy_nmadvise", u64_(0)),
    ("muzzy_purged", u64_(0)),
    ("base", arena(Fig::Base)),
    ("internal", size(0)),
    ("metadata_thp", size(0)),
    ("tcache_bytes", size(0)),
    ("tcache_stashed_bytes", size(0)),
    ("resident", arena(Fig::Resident)),
    ("abandoned_vm", size(0)),
    ("hpa_sec_bytes", size(0)),
    (
        "small",
        Named(&[
            ("allocated", size(0)),
            ("nmalloc", u64_(0)),
            ("ndalloc", u64_(0)),
            ("nrequests", u64_(0)),
            ("nfills", u64_(0)),
            ("nflushes", u64_(0)),
        ]),
    ),
    (
        "large",
        Named(&[
            ("allocated", arena(Fig::LargeAllocated)),
            ("nmalloc", u64_(0)),
            ("ndalloc", u64_(0)),
            ("nrequests", u64_(0)),
            ("nfills", u64_(0)),
            ("nflushes", u64_(0)),
        ]),
    ),
    (
        "bins",
        Indexed(
            Index::Bin,
            &Named(&[
                ("nmalloc", u64_(0)),
                ("ndalloc", u64_(0)),
                ("nrequests", u64_(0)),
                ("curregs", size(0)),
                ("nfills", u64_(0)),
                ("nflushes", u64_(0)),
                ("nslabs", u64_(0)),
                ("nreslabs", u64_(0)),
                ("curslabs", size(0)),
                ("nonfull_slabs", size(0)),
                ("mutex", MUTEX),
            ]),
        ),
    ),
    (
        "lextents",
        Indexed(
            Index::Lextent,
            &Named(&[
                ("nmalloc", u64_(0)),
                ("ndalloc", u64_(0)),
                ("nrequests", u64_(0)),
                ("curlextents", size(0)),
            ]),
        ),
    ),
    (
        "extents",
        Indexed(
            Index::Extent,
            &Named(&[
                ("ndirty", size(0)),
                ("nmuzzy", size(0)),
                ("nretained", size(0)),
                ("dirty_bytes", size(0)),
                ("muzzy_bytes", size(0)),
                ("retained_bytes", size(0)),
            ]),
        ),
    ),
    (
        "mutexes",
        Named(&[
            ("large", MUTEX),
            ("extent_avail", MUTEX),
            ("extents_dirty", MUTEX),
            ("extents_muzzy", MUTEX),
            ("extents_retained", MUTEX),
            ("decay_dirty", MUTEX),
            ("decay_muzzy", MUTEX),
            ("base", MUTEX),
            ("tcache_list", MUTEX),
            ("hpa_shard", MUTEX),
            ("hpa_shard_grow", MUTEX),
            ("hpa_sec", MUTEX),
        ]),
    ),
    (
        "hpa_shard",
        Named(&[
            ("full_slabs", HPA_SLABS),
            ("empty_slabs", HPA_SLABS),
            ("nonfull_slabs", Indexed(Index::HpaNonfull, &HPA_SLABS)),
            ("npurge_passes", u64_(0)),
            ("npurges", u64_(0)),
            ("nhugifies", u64_(0)),
            ("ndehugifies", u64_(0)),
        ]),
    ),
]);
/// jemalloc's malloc_strtoumax on one name element: leading blanks, a sign, decimal digits
/// (none: 0); u64::MAX on overflow.
fn strtoumax(s: &[u8]) -> u64 {
    let mut i = s.iter().take_while(|c| c.is_ascii_whitespace()).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut v: u64 = 0;
    for &c in s[i.min(s.len())..].iter().take_while(|c| c.is_ascii_digit()) {
        match v.checked_mul(10).and_then(|v| v.checked_add((c - b'0') as u64)) {
            Some(n) => v = n,
            None => return u64::MAX,
        }
    }
    if neg {
        v.wrapping_neg()
    } else {
        v
    }
}

/// ctl_lookup: follows `name` down the tree for at most `cap` elements, filling `mib`.
/// Ok((leaf reached, if any, and the depth)): a lookup cut short by `cap` returns the partial
/// path with depth `cap` and no leaf.
fn lookup(name: &[u8], mib: &mut [usize; MAX_DEPTH], cap: usize) -> Result<(Option<Ctl>, usize), c_int> {
    let cap = cap.min(MAX_DEPTH);
    let mut rest = name;
    let mut node = &ROOT;
    for (i, slot) in mib.iter_mut().take(cap).enumerate() {
        let dot = rest.iter().position(|&c| c == b'.');
        let elm = &rest[..dot.unwrap_or(rest.len())];
        if i == 0 && elm.is_empty() {
            return Err(ENOENT);
        }
        node = match node {
            Named(children) => {
                let Some(j) = children.iter().position(|(n, _)| n.as_bytes() == elm) else {
                    return Err(ENOENT);
                };
                *slot = j;
                &children[j].1
            }
            Indexed(ix, child) => {
                let index = strtoumax(elm);
                if index == u64::MAX || !ix.valid(index as usize) {
                    return Err(ENOENT);
                }
                *slot = index as usize;
                child
            }
            Leaf(_) => return Err(ENOENT),
        };
        let leaf = match node {
            Leaf(c) => Some(*c),
            _ => None,
        };
        if leaf.is_some() || dot.is_none() {
            if dot.is_some() {
                return Err(ENOENT); // more elements than this path has
            }
            return Ok((leaf, i + 1));
        }
        rest = dot.map_or(&rest[rest.len()..], |d| &rest[d + 1..]);
    }
    Ok((None, cap))
}

/// ctl_lookupbymib.
fn lookup_mib(mib: &[usize]) -> Result<Ctl, c_int> {
    let mut node = &ROOT;
    for &m in mib {
        node = match node {
            Named(children) => match children.get(m) {
                Some((_, n)) => n,
                None => return Err(ENOENT),
            },
            Indexed(ix, child) if ix.valid(m) => child,
            Indexed(..) | Leaf(_) => return Err(ENOENT),
        };
    }
    match node {
        Leaf(c) => Ok(*c),
        _ => Err(ENOENT),
    }
}

/// A value read out, as jemalloc's C types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    /// bool
    Bool(bool),
    /// unsigned, uint32_t
    Unsigned(u32),
    /// uint64_t
    U64(u64),
    /// int64_t
    I64(i64),
    /// size_t
    Size(usize),
    /// ssize_t
    Ssize(isize),
    /// const char *
    Str(&'static CStr),
    /// a pointer
    Ptr(usize),
    /// two pointers (activity_callback_thunk_t)
    Pair(usize, usize),
}

impl Value {
    /// The value's bytes and size.
    fn bytes(self) -> ([u8; 16], usize) {
        let mut b = [0u8; 16];
        let mut put = |v: u64| b[..8].copy_from_slice(&v.to_ne_bytes());
        let n = match self {
            Value::Bool(v) => {
                put(v as u64);
                1
            }
            Value::Unsigned(v) => {
                b[..4].copy_from_slice(&v.to_ne_bytes());
                4
            }
            Value::U64(v) => {
                put(v);
                8
            }
            Value::I64(v) => {
                put(v as u64);
                8
            }
            Value::Size(v) => {
                put(v as u64);
                8
            }
            Value::Ssize(v) => {
                put(v as u64);
                8
            }
            Value::Str(s) => {
                put(s.as_ptr() as usize as u64);
                8
            }
            Value::Ptr(p) => {
                put(p as u64);
                8
            }
            Value::Pair(a, c) => {
                put(a as u64);
                b[8..].copy_from_slice(&(c as u64).to_ne_bytes());
                16
            }
        };
        (b, n)
    }
}

/// The caller's buffers.
struct Io {
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
}

impl Io {
    /// Whether a read was asked for (`oldp` and `oldlenp` both given).
    fn reads(&self) -> bool {
        !self.oldp.is_null() && !self.oldlenp.is_null()
    }
    /// `*oldlenp`, 0 when NULL.
    fn oldlen(&self) -> usize {
        if self.oldlenp.is_null() {
            0
        } else {
            unsafe { *self.oldlenp }
        }
    }
    /// READONLY()
    fn read_only(&self) -> Result<(), c_int> {
        if !self.newp.is_null() || self.newlen != 0 {
            Err(EPERM)
        } else {
            Ok(())
        }
    }
    /// WRITEONLY()
    fn write_only(&self) -> Result<(), c_int> {
        if !self.oldp.is_null() || !self.oldlenp.is_null() {
            Err(EPERM)
        } else {
            Ok(())
        }
    }
    /// NEITHER_READ_NOR_WRITE()
    fn neither(&self) -> Result<(), c_int> {
        self.write_only()?;
        self.read_only()
    }
    /// READ(v): nothing without both pointers; the wrong size copies what fits, EINVAL.
    unsafe fn read(&self, v: Value) -> Result<(), c_int> {
        if !self.reads() {
            return Ok(());
        }
        let (bytes, n) = v.bytes();
        unsafe {
            let want = *self.oldlenp;
            let copy = n.min(want);
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.oldp as *mut u8, copy);
            if want != n {
                *self.oldlenp = copy;
                return Err(EINVAL);
            }
        }
        Ok(())
    }
    /// VERIFY_READ(t): a read is required, of exactly `n` bytes.
    unsafe fn verify_read(&self, n: usize) -> Result<(), c_int> {
        if !self.reads() || self.oldlen() != n {
            if !self.oldlenp.is_null() {
                unsafe { *self.oldlenp = 0 };
            }
            return Err(EINVAL);
        }
        Ok(())
    }
    /// WRITE(v, t): the new value's bytes, if one is given (EINVAL when its size is not `N`).
    unsafe fn write<const N: usize>(&self) -> Result<Option<[u8; N]>, c_int> {
        if self.newp.is_null() {
            return Ok(None);
        }
        if self.newlen != N {
            return Err(EINVAL);
        }
        let mut b = [0u8; N];
        unsafe { core::ptr::copy_nonoverlapping(self.newp as *const u8, b.as_mut_ptr(), N) };
        Ok(Some(b))
    }
    /// ASSURED_WRITE(v, t): a write is required, of exactly `N` bytes.
    unsafe fn assured_write<const N: usize>(&self) -> Result<[u8; N], c_int> {
        match unsafe { self.write::<N>() }? {
            Some(b) => Ok(b),
            None => Err(EINVAL),
        }
    }
}

fn usize_of(b: [u8; 8]) -> usize {
    u64::from_ne_bytes(b) as usize
}

/// The statistics as of the last `epoch` write (jemalloc's ctl_refresh): each figure an
/// atomic of its own, with no lock (a fork in the middle of a refresh leaves the child a
/// usable snapshot, never a held lock); two refreshes at once may mix their figures, each
/// of them true.
static FIGURES: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// The backend the figures are of (`u8::MAX`: none yet).
static FIGURES_OF: AtomicU8 = AtomicU8::new(u8::MAX);
/// `experimental.arenas.0.pactivep` points here: the active pages as of the last refresh.
static PACTIVE: AtomicUsize = AtomicUsize::new(0);
/// When the emulation first answered (CLOCK_MONOTONIC, ns): `stats.arenas.<i>.uptime`.
static START_NS: AtomicU64 = AtomicU64::new(0);

fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// A snapshot in jemalloc's order: allocated <= active <= resident <= mapped (each raised to
/// the one before where a backend's own figures cross).
fn ordered(s: Snapshot) -> Snapshot {
    let active = s.active.max(s.allocated);
    let resident = s.resident.max(active);
    let mapped = s.mapped.max(resident);
    Snapshot { active, resident, mapped, ..s }
}

/// The snapshot of `b` and its epoch; `refresh`: a new one first (an `epoch` write). The
/// first use takes one, as jemalloc's ctl_init does.
fn cached(b: Backend, refresh: bool) -> (Snapshot, u64) {
    if refresh || FIGURES_OF.load(Acquire) != b as u8 {
        let _ = START_NS.compare_exchange(0, monotonic_ns(), Relaxed, Relaxed);
        let s = ordered(snapshot(b));
        let v = [s.allocated, s.active, s.metadata, s.resident, s.mapped, s.retained, s.dirty, s.muzzy];
        for (f, v) in FIGURES.iter().zip(v) {
            f.store(v, Relaxed);
        }
        PACTIVE.store(s.active.div_ceil(PAGE), Relaxed);
        FIGURES_OF.store(b as u8, Release);
        EPOCH.fetch_add(1, Release);
    }
    let epoch = EPOCH.load(Acquire);
    let f = |i: usize| FIGURES[i].load(Relaxed);
    let snap = Snapshot {
        allocated: f(0),
        active: f(1),
        metadata: f(2),
        resident: f(3),
        mapped: f(4),
        retained: f(5),
        dirty: f(6),
        muzzy: f(7),
    };
    (snap, epoch)
}

/// `version` under each backend: jemalloc's release, and who really serves.
fn version(b: Backend) -> &'static CStr {
    match b {
        Backend::Glibc => c"5.3.0-0-shim-emulated-on-glibc",
        Backend::Jemalloc => c"5.3.0-0-shim-emulated-on-jemalloc",
        Backend::Mimalloc => c"5.3.0-0-shim-emulated-on-mimalloc",
        Backend::Tcmalloc => c"5.3.0-0-shim-emulated-on-tcmalloc",
        Backend::Snmalloc => c"5.3.0-0-shim-emulated-on-snmalloc",
        Backend::Rpmalloc => c"5.3.0-0-shim-emulated-on-rpmalloc",
        // The program's own library serves itself: never emulated.
        Backend::Own => c"5.3.0-0-shim-emulated-on-own",
    }
}

/// `opt.dss` and every arena's `dss`: glibc's main arena grows with sbrk; the others map.
fn dss(b: Backend) -> &'static CStr {
    if b == Backend::Glibc {
        c"primary"
    } else {
        c"disabled"
    }
}

/// The thread counters `thread.allocatedp` and `thread.deallocatedp` point to: no backend
/// counts a thread's bytes, so they stay 0 (writable memory, as jemalloc's are).
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static DEALLOCATED: AtomicU64 = AtomicU64::new(0);

/// What `arena.<i>.extent_hooks` points to: an extent_hooks_t (nine function pointers) with
/// none set, since no backend takes hooks.
static EXTENT_HOOKS: [usize; 9] = [0; 9];

/// Settings the backends honour trivially (nothing in them acts on their value), kept so
/// that a read gives back what was written.
static MAX_BG_THREADS: AtomicUsize = AtomicUsize::new(MAX_BACKGROUND_THREADS);
static ARENAS_DIRTY_DECAY_MS: AtomicIsize = AtomicIsize::new(DIRTY_DECAY_MS);
static ARENAS_MUZZY_DECAY_MS: AtomicIsize = AtomicIsize::new(MUZZY_DECAY_MS);
static SAFETY_CHECK_ABORT: AtomicUsize = AtomicUsize::new(0);
static ACTIVITY_CALLBACK: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];
static NEXT_TCACHE: AtomicU64 = AtomicU64::new(0);

/// A read-only leaf's value, None where the index has none (an arena that is not 0).
fn ro_value(r: Read, mib: &[usize], b: Backend) -> Value {
    let ix = |i: usize| mib.get(i).copied().unwrap_or(0);
    match r {
        Read::Const(v) => v,
        Read::Version => Value::Str(version(b)),
        Read::OptDss => Value::Str(dss(b)),
        Read::Narenas => Value::Unsigned(NARENAS),
        Read::Stat(s) => {
            let (snap, _) = cached(b, false);
            Value::Size(match s {
                Stat::Allocated => snap.allocated,
                Stat::Active => snap.active,
                Stat::Metadata => snap.metadata,
                Stat::Resident => snap.resident,
                Stat::Mapped => snap.mapped,
                Stat::Retained => snap.retained,
            })
        }
        Read::Arena(f) => {
            let (snap, _) = cached(b, false);
            let merged = ix(2) == ARENAS_ALL;
            match f {
                Fig::Pactive => Value::Size(snap.active.div_ceil(PAGE)),
                Fig::Pdirty => Value::Size(snap.dirty / PAGE),
                Fig::Pmuzzy => Value::Size(snap.muzzy / PAGE),
                Fig::Mapped => Value::Size(snap.mapped),
                Fig::Retained => Value::Size(snap.retained),
                Fig::Base => Value::Size(snap.metadata),
                Fig::Resident => Value::Size(snap.resident),
                Fig::LargeAllocated => Value::Size(snap.allocated),
                Fig::Nthreads => Value::Unsigned(1),
                Fig::Uptime => Value::U64(monotonic_ns().saturating_sub(START_NS.load(Relaxed))),
                // The merged arenas have no dss and no decay of their own (jemalloc: "N/A", -1).
                Fig::Dss => Value::Str(if merged { c"N/A" } else { dss(b) }),
                Fig::DirtyDecayMs => Value::Ssize(if merged { -1 } else { DIRTY_DECAY_MS }),
                Fig::MuzzyDecayMs => Value::Ssize(if merged { -1 } else { MUZZY_DECAY_MS }),
            }
        }
        Read::BinSize => Value::Size(sc::bin(ix(2)).0),
        Read::BinNregs => Value::Unsigned(sc::bin(ix(2)).1),
        Read::BinSlabSize => Value::Size(sc::bin(ix(2)).2),
        Read::BinNshards => Value::Unsigned((ix(2) < sc::NBINS) as u32),
        Read::LextentSize => Value::Size(sc::lextent(ix(2))),
        Read::CounterP => {
            let counter = if mib.get(1) == Some(&2) { &ALLOCATED } else { &DEALLOCATED };
            Value::Ptr(counter.as_ptr() as usize)
        }
    }
}

/// Whether arena `i` is one `arena_get` finds: arena 0, the only one.
fn arena_exists(i: usize) -> bool {
    i < NARENAS as usize
}

/// An arena setting's value now (jemalloc's default: the backend keeps it).
fn setting(s: Setting) -> Value {
    match s {
        Setting::OversizeThreshold => Value::Size(OVERSIZE_THRESHOLD),
        Setting::DirtyDecayMs => Value::Ssize(DIRTY_DECAY_MS),
        Setting::MuzzyDecayMs => Value::Ssize(MUZZY_DECAY_MS),
    }
}

/// A new value for a setting the backend keeps as it is: the same value is taken, another
/// is an operation that failed (EFAULT, said once).
fn only_same(now: &[u8], new: &[u8], name: Option<&[u8]>, mib: &[usize], b: Backend) -> Result<(), c_int> {
    if now == new {
        Ok(())
    } else {
        say(name, mib, Trouble::CannotHonour, b);
        Err(EFAULT)
    }
}

/// [`say_once`] about the name called (`mallctl`), or the one its MIB stands for
/// (`mallctlbymib`, spelled out only then).
fn say(name: Option<&[u8]>, mib: &[usize], trouble: Trouble, b: Backend) {
    match name {
        Some(n) => {
            say_once("mallctl", n, trouble, b);
        }
        None => {
            say_once("mallctlbymib", mib_name(mib).as_bytes(), trouble, b);
        }
    }
}

/// Runs leaf `ctl` reached by `mib`.
unsafe fn run(b: Backend, ctl: Ctl, mib: &[usize], io: &Io, name: Option<&[u8]>) -> Result<(), c_int> {
    let arena_ind = mib.get(1).copied().unwrap_or(0);
    unsafe {
        match ctl {
            Ro(r) => {
                io.read_only()?;
                io.read(ro_value(r, mib, b))
            }
            Absent => {
                say(name, mib, Trouble::UnknownName, b);
                Err(ENOENT)
            }
            Epoch => {
                let new = io.write::<8>()?;
                let (_, epoch) = cached(b, new.is_some());
                io.read(Value::U64(epoch))
            }
            BackgroundThread | ThreadTcacheEnabled => {
                // background_thread is off and cannot be turned on; the thread cache is on
                // and cannot be turned off.
                let now = ctl == ThreadTcacheEnabled;
                let new = io.write::<1>()?.map(|v| v[0] != 0);
                io.read(Value::Bool(now))?;
                match new {
                    Some(v) if v != now => {
                        say(name, mib, Trouble::CannotHonour, b);
                        Err(EFAULT)
                    }
                    _ => Ok(()),
                }
            }
            MaxBackgroundThreads => {
                let new = io.write::<8>()?.map(usize_of);
                io.read(Value::Size(MAX_BG_THREADS.load(Relaxed)))?;
                match new {
                    Some(n) if n > MAX_BACKGROUND_THREADS => Err(EINVAL),
                    // No background thread runs: any limit holds.
                    Some(n) => {
                        MAX_BG_THREADS.store(n, Relaxed);
                        Ok(())
                    }
                    None => Ok(()),
                }
            }
            ThreadArena => {
                let new = io.write::<4>()?.map(u32::from_ne_bytes);
                io.read(Value::Unsigned(0))?;
                match new {
                    // There is one arena, 0: jemalloc's answer for one it does not have.
                    Some(n) if n != 0 => Err(EFAULT),
                    _ => Ok(()),
                }
            }
            ThreadTcacheFlush | ThreadIdle => {
                io.neither()?;
                super::flush_thread_cache(b);
                Ok(())
            }
            ThreadPeakReset => io.neither(),
            TcacheCreate => {
                io.read_only()?;
                io.verify_read(4)?;
                // A thread cache named by MALLOCX_TCACHE(i) in mallocx's flags: the backend
                // serves those calls as any other, so any index is honoured.
                let i = NEXT_TCACHE.fetch_add(1, Relaxed);
                if i >= TCACHES_MAX as u64 {
                    say(name, mib, Trouble::CannotHonour, b);
                    return Err(EFAULT);
                }
                io.read(Value::Unsigned(i as u32))
            }
            TcacheFlushOrDestroy => {
                io.write_only()?;
                io.assured_write::<4>()?;
                Ok(())
            }
            ArenaInitialized => {
                io.read_only()?;
                // Arena 0, `narenas` (all of them, deprecated) and all; not the destroyed.
                io.read(Value::Bool(arena_ind != ARENAS_DESTROYED))
            }
            ArenaDecay | ArenaPurge => {
                io.neither()?;
                if arena_ind != ARENAS_DESTROYED {
                    super::purge(b);
                }
                Ok(())
            }
            ArenaResetOrDestroy => {
                io.neither()?;
                // jemalloc's answer for an automatic arena, which arena 0 is.
                Err(EFAULT)
            }
            ArenaDss => {
                let new = io.write::<8>()?.map(usize_of).filter(|&p| p != 0);
                let new = match new {
                    Some(p) => {
                        let s = CStr::from_ptr(p as *const c_char);
                        match DSS_NAMES.iter().find(|n| n.to_bytes() == s.to_bytes()) {
                            Some(n) => Some(*n),
                            None => return Err(EINVAL),
                        }
                    }
                    None => None,
                };
                if !(arena_exists(arena_ind) || arena_ind == ARENAS_ALL || arena_ind == NARENAS as usize) {
                    return Err(EFAULT);
                }
                if let Some(n) = new {
                    only_same(dss(b).to_bytes(), n.to_bytes(), name, mib, b)?;
                }
                io.read(Value::Str(dss(b)))
            }
            ArenaSetting(s) => {
                if !arena_exists(arena_ind) {
                    return Err(EFAULT);
                }
                let now = setting(s);
                if io.reads() {
                    io.read(now)?;
                }
                if let Some(new) = io.write::<8>()? {
                    only_same(&now.bytes().0[..8], &new, name, mib, b)?;
                }
                Ok(())
            }
            ArenaExtentHooks => {
                if !arena_exists(arena_ind) {
                    return Err(EFAULT);
                }
                let now = EXTENT_HOOKS.as_ptr() as usize;
                if let Some(new) = io.write::<8>()? {
                    only_same(&now.to_ne_bytes(), &new, name, mib, b)?;
                }
                io.read(Value::Ptr(now))
            }
            ArenaRetainGrowLimit => {
                if !arena_exists(arena_ind) {
                    return Err(EFAULT);
                }
                let now = sc::largest_psize();
                if let Some(new) = io.write::<8>()? {
                    only_same(&now.to_ne_bytes(), &new, name, mib, b)?;
                }
                io.read(Value::Size(now))
            }
            ArenasDecayMs(dirty) => {
                let v = if dirty { &ARENAS_DIRTY_DECAY_MS } else { &ARENAS_MUZZY_DECAY_MS };
                if io.reads() {
                    io.read(Value::Ssize(v.load(Relaxed)))?;
                }
                // The default of arenas created later: none are, so any valid one holds.
                if let Some(new) = io.write::<8>()? {
                    let ms = isize::from_ne_bytes(new);
                    if ms < -1 {
                        return Err(EFAULT);
                    }
                    v.store(ms, Relaxed);
                }
                Ok(())
            }
            ArenasCreate | ArenasCreateExt => {
                io.verify_read(4)?;
                // extent_hooks_t * for arenas.create, arena_config_t for the other.
                if ctl == ArenasCreate {
                    io.write::<8>()?;
                } else {
                    io.write::<16>()?;
                }
                say(name, mib, Trouble::CannotHonour, b);
                Err(EAGAIN)
            }
            ArenasLookup => {
                // Every block the program holds is in the one arena.
                match io.write::<8>()?.map(usize_of) {
                    Some(p) if p != 0 => io.read(Value::Unsigned(0)),
                    _ => Err(EINVAL),
                }
            }
            StatsMutexesReset => Ok(()),
            HooksInstall => {
                if !io.reads() || io.newp.is_null() {
                    return Err(EINVAL);
                }
                // hooks_t: three hook pointers and their argument.
                io.write::<32>()?;
                say(name, mib, Trouble::CannotHonour, b);
                Err(EAGAIN)
            }
            HooksRemove => {
                io.write_only()?;
                match io.write::<8>()?.map(usize_of) {
                    Some(h) if h != 0 => Ok(()),
                    _ => Err(EINVAL),
                }
            }
            HooksProf => {
                if io.oldp.is_null() && io.newp.is_null() {
                    return Err(EINVAL);
                }
                if !io.oldp.is_null() {
                    io.read(Value::Ptr(0))?;
                }
                if !io.newp.is_null() {
                    // Without profiling (opt.prof off) a hook cannot be set.
                    return Err(ENOENT);
                }
                Ok(())
            }
            HooksSafetyCheckAbort => {
                io.write_only()?;
                if let Some(h) = io.write::<8>()? {
                    // Called when a safety check fails: the backends run none of jemalloc's.
                    SAFETY_CHECK_ABORT.store(usize_of(h), Relaxed);
                }
                Ok(())
            }
            UtilizationQuery => {
                const OUT: usize = 6 * 8;
                if !io.reads() || io.oldlen() != OUT || io.newp.is_null() {
                    return Err(EINVAL);
                }
                io.write::<8>()?;
                // As jemalloc answers for a large block: no slab to move it to, no free
                // region, one region; the extent's size unknown (0).
                let out = [0usize, 0, 1, 0, 0, 0];
                core::ptr::copy_nonoverlapping(out.as_ptr() as *const u8, io.oldp as *mut u8, OUT);
                Ok(())
            }
            UtilizationBatchQuery => {
                let n = io.newlen / 8;
                if !io.reads()
                    || io.newp.is_null()
                    || io.newlen == 0
                    || io.newlen != n * 8
                    || io.oldlen() != n * 24
                {
                    return Err(EINVAL);
                }
                let out = io.oldp as *mut usize;
                for i in 0..n {
                    // Each: no free region, one region, size unknown (as query).
                    out.add(3 * i).write_unaligned(0);
                    out.add(3 * i + 1).write_unaligned(1);
                    out.add(3 * i + 2).write_unaligned(0);
                }
                Ok(())
            }
            PactiveP => {
                if !io.reads() || io.oldlen() != 8 {
                    return Err(EINVAL);
                }
                io.read_only()?;
                let i = mib.get(2).copied().unwrap_or(0);
                if !arena_exists(i) {
                    return Err(EFAULT);
                }
                cached(b, false);
                io.read(Value::Ptr(PACTIVE.as_ptr() as usize))
            }
            BatchAlloc => {
                io.verify_read(8)?;
                // batch_alloc_packet_t: ptrs, num, size, flags.
                io.assured_write::<32>()?;
                // None filled: the blocks would reach the program unrecorded. jemalloc's
                // batch_alloc may fill fewer than asked, down to none.
                say(name, mib, Trouble::CannotHonour, b);
                io.read(Value::Size(0))
            }
            ActivityCallback => {
                let now = Value::Pair(ACTIVITY_CALLBACK[0].load(Relaxed), ACTIVITY_CALLBACK[1].load(Relaxed));
                io.read(now)?;
                if let Some(new) = io.write::<16>()? {
                    // Called by jemalloc as a thread allocates: the backends never call it.
                    let (f, a) = new.split_at(8);
                    ACTIVITY_CALLBACK[0].store(usize_of(f.try_into().unwrap_or([0; 8])), Relaxed);
                    ACTIVITY_CALLBACK[1].store(usize_of(a.try_into().unwrap_or([0; 8])), Relaxed);
                }
                Ok(())
            }
        }
    }
}

/// The bytes of a C string, or None for NULL.
unsafe fn c_bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

/// jemalloc's `mallctl`, answered from backend `b`.
///
/// # Safety
/// As jemalloc's `mallctl`: `name` a C string, the pointers valid for what they point to.
pub unsafe fn mallctl(
    b: Backend,
    name: *const c_char,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
) -> c_int {
    let Some(name) = (unsafe { c_bytes(name) }) else { return ENOENT };
    let mut mib = [0usize; MAX_DEPTH];
    let found = match lookup(name, &mut mib, MAX_DEPTH) {
        Ok((Some(ctl), depth)) => Ok((ctl, depth)),
        Ok((None, _)) => Err(ENOENT),
        Err(e) => Err(e),
    };
    let (ctl, depth) = match found {
        Ok(f) => f,
        Err(e) => {
            say_once("mallctl", name, Trouble::UnknownName, b);
            return e;
        }
    };
    let io = Io { oldp, oldlenp, newp, newlen };
    match unsafe { run(b, ctl, &mib[..depth], &io, Some(name)) } {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// jemalloc's `mallctlnametomib`, for the names [`mallctl`] answers.
///
/// # Safety
/// As jemalloc's: `mibp` holds `*miblenp` entries.
pub unsafe fn nametomib(b: Backend, name: *const c_char, mibp: *mut usize, miblenp: *mut usize) -> c_int {
    let Some(name) = (unsafe { c_bytes(name) }) else { return ENOENT };
    if miblenp.is_null() || mibp.is_null() {
        return EINVAL;
    }
    let cap = unsafe { *miblenp };
    let mut mib = [0usize; MAX_DEPTH];
    match lookup(name, &mut mib, cap) {
        Ok((_, depth)) => {
            unsafe {
                core::ptr::copy_nonoverlapping(mib.as_ptr(), mibp, depth.min(cap));
                *miblenp = depth;
            }
            0
        }
        Err(e) => {
            say_once("mallctlnametomib", name, Trouble::UnknownName, b);
            e
        }
    }
}

/// jemalloc's `mallctlbymib`, for the MIBs [`nametomib`] gives.
///
/// # Safety
/// As jemalloc's: `mib` holds `miblen` entries.
pub unsafe fn bymib(
    b: Backend,
    mib: *const usize,
    miblen: usize,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
) -> c_int {
    if mib.is_null() && miblen != 0 {
        return ENOENT;
    }
    let mib = if miblen == 0 { &[][..] } else { unsafe { core::slice::from_raw_parts(mib, miblen) } };
    let ctl = match lookup_mib(mib) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let io = Io { oldp, oldlenp, newp, newlen };
    match unsafe { run(b, ctl, mib, &io, None) } {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// Redis' and Valkey's jemalloc extension `get_defrag_hint(ptr)` (`je_get_defrag_hint` in
/// their build): whether active defragmentation should move the block. The serving backend
/// has no slabs to compare: 0, keep it where it is.
pub fn defrag_hint(_b: Backend, _ptr: *mut c_void) -> c_int {
    0
}

/// The name a MIB stands for (for the shim's one line about it), as far as the tree goes.
fn mib_name(mib: &[usize]) -> Buf<160> {
    use core::fmt::Write;
    let mut out = Buf::new();
    let mut node = &ROOT;
    for (i, &m) in mib.iter().enumerate() {
        let sep = if i == 0 { "" } else { "." };
        node = match node {
            Named(children) => match children.get(m) {
                Some((n, child)) => {
                    let _ = write!(out, "{sep}{n}");
                    child
                }
                None => break,
            },
            Indexed(_, child) => {
                let _ = write!(out, "{sep}{m}");
                child
            }
            Leaf(_) => break,
        };
    }
    out
}

/// `malloc_stats_print`'s write callback.
pub type WriteCb = Option<unsafe extern "C" fn(*mut c_void, *const c_char)>;

/// jemalloc's `malloc_stats_print` from backend `b`: the totals jemalloc prints first, as
/// text or (`opts` with 'J') JSON, each line through `write_cb` (stderr when it is None).
/// The statistics are refreshed first, as jemalloc does.
///
/// # Safety
/// `opts` NULL or a C string; `write_cb` callable with `cbopaque`.
pub unsafe fn stats_print(b: Backend, write_cb: WriteCb, cbopaque: *mut c_void, opts: *const c_char) {
    use core::fmt::Write;
    let json = unsafe { c_bytes(opts) }.is_some_and(|o| o.contains(&b'J'));
    let (s, _) = cached(b, true);
    let ver = version(b).to_str().unwrap_or("");
    let page = PAGE;
    let mut line = Buf::<512>::new();
    let emit = |line: &mut Buf<512>| {
        match write_cb {
            Some(cb) => unsafe { cb(cbopaque, line.as_c_ptr()) },
            None => line.write_to_fd(2),
        }
        line.clear();
    };
    if json {
        let _ = write!(
            line,
            "{{\n\"jemalloc\": {{\n\"version\": \"{ver}\",\n\"emulated_on\": \"{}\",\n",
            b.name()
        );
        emit(&mut line);
        let _ = write!(line, "\"arenas\": {{\n\"narenas\": {NARENAS},\n\"page\": {page}\n}},\n");
        emit(&mut line);
        let _ = write!(
            line,
            "\"stats\": {{\n\"allocated\": {},\n\"active\": {},\n\"metadata\": {},\n\"resident\": {},\n\"mapped\": {},\n\"retained\": {}\n}}\n}}\n}}\n",
            s.allocated, s.active, s.metadata, s.resident, s.mapped, s.retained
        );
        emit(&mut line);
    } else {
        let _ = write!(line, "___ Begin jemalloc statistics ___\nVersion: \"{ver}\"\n");
        emit(&mut line);
        let _ = writeln!(line, "Emulated by the shim: {} serves this program's jemalloc calls", b.name());
        emit(&mut line);
        let _ = write!(line, "Arenas: {NARENAS}\nPage size: {page}\n");
        emit(&mut line);
        let _ = writeln!(
            line,
            "Allocated: {}, active: {}, metadata: {} (n_thp 0), resident: {}, mapped: {}, retained: {}",
            s.allocated, s.active, s.metadata, s.resident, s.mapped, s.retained
        );
        emit(&mut line);
        let _ = writeln!(line, "___ End jemalloc statistics ___");
        emit(&mut line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ptr::null_mut;
    use tikv_jemalloc_sys as je;

    /// The emulation on glibc (its statistics always exist in a test process).
    const B: Backend = Backend::Glibc;

    unsafe fn emu(
        name: &CStr,
        oldp: *mut c_void,
        oldlenp: *mut usize,
        newp: *mut c_void,
        newlen: usize,
    ) -> c_int {
        unsafe { mallctl(B, name.as_ptr(), oldp, oldlenp, newp, newlen) }
    }
    unsafe fn real(
        name: &CStr,
        oldp: *mut c_void,
        oldlenp: *mut usize,
        newp: *mut c_void,
        newlen: usize,
    ) -> c_int {
        unsafe { je::mallctl(name.as_ptr(), oldp, oldlenp, newp, newlen) }
    }

    /// Every name the emulation answers, with its C size (0: an action).
    const NAMES: &[(&CStr, usize)] = &[
        (c"version", 8),
        (c"epoch", 8),
        (c"stats.allocated", 8),
        (c"stats.active", 8),
        (c"stats.metadata", 8),
        (c"stats.resident", 8),
        (c"stats.mapped", 8),
        (c"stats.retained", 8),
        (c"stats.arenas.0.pactive", 8),
        (c"stats.arenas.4096.pactive", 8),
        (c"stats.arenas.4096.pdirty", 8),
        (c"stats.arenas.4096.pmuzzy", 8),
        (c"arenas.narenas", 4),
        (c"arenas.page", 8),
        (c"arenas.quantum", 8),
        (c"opt.narenas", 4),
        (c"opt.tcache", 1),
        (c"opt.abort", 1),
        (c"opt.dss", 8),
        (c"opt.junk", 8),
        (c"thread.tcache.enabled", 1),
        (c"thread.arena", 4),
        (c"background_thread", 1),
        (c"config.stats", 1),
    ];

    #[test]
    fn the_sizes_are_jemallocs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        for &(name, size) in NAMES {
            // The real jemalloc says how big the value is: a read of 64 bytes is EINVAL
            // with *oldlenp set to the size.
            for f in [emu as unsafe fn(&CStr, *mut c_void, *mut usize, *mut c_void, usize) -> c_int, real] {
                let mut buf = [0u8; 64];
                let mut len = buf.len();
                let rc = unsafe { f(name, buf.as_mut_ptr() as *mut c_void, &mut len, null_mut(), 0) };
                assert_eq!((rc, len), (EINVAL, size), "{name:?}");
            }
        }
    }

    #[test]
    fn errors_match_jemallocs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut v = 0usize;
        let vp = &mut v as *mut _ as *mut c_void;
        // The real jemalloc's thread cache exists once this thread has allocated.
        unsafe { je::free(je::malloc(8)) };
        let mut small;
        for f in [emu as unsafe fn(&CStr, *mut c_void, *mut usize, *mut c_void, usize) -> c_int, real] {
            unsafe {
                let mut len = 8usize;
                // read-only
                assert_eq!(f(c"stats.allocated", vp, &mut len, vp, 8), EPERM);
                assert_eq!(f(c"arenas.narenas", null_mut(), null_mut(), vp, 4), EPERM);
                assert_eq!(f(c"opt.narenas", null_mut(), null_mut(), vp, 4), EPERM);
                // unknown, partial, too long, arena that does not exist
                assert_eq!(f(c"stats.nonesuch", vp, &mut len, null_mut(), 0), ENOENT);
                assert_eq!(f(c"stats", vp, &mut len, null_mut(), 0), ENOENT);
                assert_eq!(f(c"stats.allocated.x", vp, &mut len, null_mut(), 0), ENOENT);
                assert_eq!(f(c"", vp, &mut len, null_mut(), 0), ENOENT);
                assert_eq!(f(c"stats.arenas.4000.pactive", vp, &mut len, null_mut(), 0), ENOENT);
                assert_eq!(f(c"arena.4000.purge", null_mut(), null_mut(), null_mut(), 0), ENOENT);
                // epoch: wrong write size; a short read copies 4 bytes
                let e: u64 = 1;
                assert_eq!(f(c"epoch", null_mut(), null_mut(), &e as *const _ as *mut c_void, 4), EINVAL);
                small = 4;
                assert_eq!(f(c"epoch", vp, &mut small, null_mut(), 0), EINVAL);
                assert_eq!(small, 4);
                // actions take no buffers
                assert_eq!(f(c"thread.tcache.flush", vp, &mut len, null_mut(), 0), EPERM);
                assert_eq!(f(c"thread.tcache.flush", null_mut(), null_mut(), null_mut(), 0), 0);
                assert_eq!(f(c"arena.4096.purge", null_mut(), null_mut(), null_mut(), 0), 0);
                assert_eq!(f(c"arena.0.decay", null_mut(), null_mut(), null_mut(), 0), 0);
                assert_eq!(f(c"arena.4096.purge", vp, &mut len, null_mut(), 0), EPERM);
                // a NULL oldp reads nothing and succeeds
                assert_eq!(f(c"stats.allocated", null_mut(), &mut len, null_mut(), 0), 0);
                // thread.arena: an arena that does not exist
                let bad: u32 = 3000;
                assert_eq!(
                    f(c"thread.arena", null_mut(), null_mut(), &bad as *const _ as *mut c_void, 4),
                    EFAULT
                );
                let zero: u32 = 0;
                assert_eq!(
                    f(c"thread.arena", null_mut(), null_mut(), &zero as *const _ as *mut c_void, 4),
                    0
                );
                // arenas.create wants a read of an unsigned
                assert_eq!(f(c"arenas.create", null_mut(), null_mut(), null_mut(), 0), EINVAL);
            }
        }
    }

    #[test]
    fn nametomib_round_trips_and_partial_mibs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        for &(name, size) in NAMES {
            let mut mib = [0usize; 8];
            let mut n = mib.len();
            assert_eq!(unsafe { nametomib(B, name.as_ptr(), mib.as_mut_ptr(), &mut n) }, 0, "{name:?}");
            if size != 8 {
                continue;
            }
            let (mut a, mut b) = (0usize, 0usize);
            let (mut la, mut lb) = (8usize, 8usize);
            let rc =
                unsafe { bymib(B, mib.as_ptr(), n, &mut a as *mut _ as *mut c_void, &mut la, null_mut(), 0) };
            let rc2 = unsafe { emu(name, &mut b as *mut _ as *mut c_void, &mut lb, null_mut(), 0) };
            assert_eq!((rc, rc2), (0, 0), "{name:?}");
        }
        // A MIB for stats.arenas.<i>.pmuzzy with the index replaced, as programs do.
        let mut mib = [0usize; 4];
        let mut n = 4;
        assert_eq!(unsafe { nametomib(B, c"stats.arenas.0.pmuzzy".as_ptr(), mib.as_mut_ptr(), &mut n) }, 0);
        assert_eq!(n, 4);
        assert_eq!(mib[2], 0);
        mib[2] = ARENAS_ALL;
        let mut v = 0usize;
        let mut l = 8usize;
        assert_eq!(
            unsafe { bymib(B, mib.as_ptr(), 4, &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0) },
            0
        );
        mib[2] = 7;
        assert_eq!(
            unsafe { bymib(B, mib.as_ptr(), 4, &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0) },
            ENOENT
        );
        // A partial MIB: the first two elements, then completed.
        let mut part = [0usize; 4];
        let mut n = 2;
        assert_eq!(unsafe { nametomib(B, c"stats.arenas.0.pmuzzy".as_ptr(), part.as_mut_ptr(), &mut n) }, 0);
        assert_eq!((n, part[..2] == mib[..2]), (2, true));
        // A MIB that stops at an inner node, or goes past a leaf.
        assert_eq!(
            unsafe { bymib(B, mib.as_ptr(), 2, &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0) },
            ENOENT
        );
        let long = [mib[0], mib[1], 0, mib[3], 0];
        assert_eq!(
            unsafe { bymib(B, long.as_ptr(), 5, &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0) },
            ENOENT
        );
        assert_eq!(
            unsafe {
                bymib(B, [99usize].as_ptr(), 1, &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0)
            },
            ENOENT
        );
    }

    #[test]
    fn statistics_follow_the_epoch() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let page = PAGE;
        for b in [Backend::Glibc, Backend::Mimalloc, Backend::Snmalloc, Backend::Rpmalloc] {
            let read = |name: &CStr| {
                let mut v = 0usize;
                let mut l = 8usize;
                let rc = unsafe {
                    mallctl(b, name.as_ptr(), &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0)
                };
                assert_eq!(rc, 0, "{name:?} on {b:?}");
                v
            };
            let advance = || {
                let mut e: u64 = 1;
                let mut l = 8usize;
                let p = &mut e as *mut u64 as *mut c_void;
                assert_eq!(unsafe { mallctl(b, c"epoch".as_ptr(), p, &mut l, p, 8) }, 0);
            };
            advance();
            let before = read(c"stats.allocated");
            // 64 MiB from the backend itself, touched.
            let blocks: Vec<*mut c_void> = (0..64)
                .map(|_| unsafe {
                    let p = super::super::alloc_in(b, 1 << 20);
                    core::ptr::write_bytes(p as *mut u8, 1, 1 << 20);
                    p
                })
                .collect();
            assert_eq!(read(c"stats.allocated"), before, "{b:?}: statistics moved without an epoch");
            advance();
            let during = read(c"stats.allocated");
            eprintln!("{b:?}: allocated {before} then {during}");
            assert!(during >= before + (32 << 20), "{b:?}: {before} then {during}");
            assert!(read(c"stats.arenas.4096.pactive") * page >= during.min(read(c"stats.active")) / 2);
            assert!(read(c"stats.resident") >= read(c"stats.active"));
            for p in blocks {
                unsafe { super::super::free_in(b, p) };
            }
            assert_eq!(
                unsafe { mallctl(b, c"arena.4096.purge".as_ptr(), null_mut(), null_mut(), null_mut(), 0) },
                0
            );
            advance();
            let after = read(c"stats.allocated");
            eprintln!("{b:?}: after the frees {after}");
            assert!(after + (32 << 20) <= during, "{b:?}: {during} then {after} after the frees");
        }
    }

    #[test]
    fn stats_print_reaches_the_callback() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        unsafe extern "C" fn cb(arg: *mut c_void, s: *const c_char) {
            let out = unsafe { &mut *(arg as *mut Vec<u8>) };
            out.extend_from_slice(unsafe { CStr::from_ptr(s) }.to_bytes());
        }
        let mut out: Vec<u8> = Vec::new();
        unsafe { stats_print(B, Some(cb), &mut out as *mut _ as *mut c_void, null_mut()) };
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("___ Begin jemalloc statistics ___"), "{text}");
        assert!(text.contains("Allocated: "), "{text}");
        let mut out: Vec<u8> = Vec::new();
        unsafe { stats_print(B, Some(cb), &mut out as *mut _ as *mut c_void, c"J".as_ptr()) };
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\"allocated\": ") && text.trim_end().ends_with('}'), "{text}");
    }

    #[test]
    fn bad_input_is_an_error_not_a_crash() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut v = 0usize;
        let mut l = 8usize;
        let vp = &mut v as *mut _ as *mut c_void;
        unsafe {
            assert_eq!(mallctl(B, core::ptr::null(), vp, &mut l, null_mut(), 0), ENOENT);
            let mut mib = [0usize; 4];
            assert_eq!(nametomib(B, c"stats.allocated".as_ptr(), mib.as_mut_ptr(), null_mut()), EINVAL);
            assert_eq!(nametomib(B, core::ptr::null(), mib.as_mut_ptr(), &mut l), ENOENT);
            assert_eq!(bymib(B, core::ptr::null(), 3, vp, &mut l, null_mut(), 0), ENOENT);
            assert_eq!(bymib(B, mib.as_ptr(), 0, vp, &mut l, null_mut(), 0), ENOENT);
            // A name of many elements, and a huge index.
            assert_eq!(mallctl(B, c"a.b.c.d.e.f.g.h.i.j".as_ptr(), vp, &mut l, null_mut(), 0), ENOENT);
            assert_eq!(
                mallctl(
                    B,
                    c"stats.arenas.99999999999999999999999.pactive".as_ptr(),
                    vp,
                    &mut l,
                    null_mut(),
                    0
                ),
                ENOENT
            );
            // Settings that cannot be taken: jemalloc's error for a failed operation.
            let on = true;
            assert_eq!(
                mallctl(
                    B,
                    c"background_thread".as_ptr(),
                    null_mut(),
                    null_mut(),
                    &on as *const _ as *mut c_void,
                    1
                ),
                EFAULT
            );
            let off = false;
            assert_eq!(
                mallctl(
                    B,
                    c"background_thread".as_ptr(),
                    null_mut(),
                    null_mut(),
                    &off as *const _ as *mut c_void,
                    1
                ),
                0
            );
            assert_eq!(
                mallctl(
                    B,
                    c"thread.tcache.enabled".as_ptr(),
                    null_mut(),
                    null_mut(),
                    &off as *const _ as *mut c_void,
                    1
                ),
                EFAULT
            );
            let mut ind = 0u32;
            let mut il = 4usize;
            assert_eq!(
                mallctl(
                    B,
                    c"arenas.create".as_ptr(),
                    &mut ind as *mut _ as *mut c_void,
                    &mut il,
                    null_mut(),
                    0
                ),
                EAGAIN
            );
            assert_eq!(
                mallctl(B, c"opt.tcache".as_ptr(), null_mut(), null_mut(), &on as *const _ as *mut c_void, 1),
                EPERM
            );
        }
    }

    #[test]
    fn strtoumax_is_jemallocs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(strtoumax(b"4096"), 4096);
        assert_eq!(strtoumax(b""), 0);
        assert_eq!(strtoumax(b"x"), 0);
        assert_eq!(strtoumax(b"99999999999999999999999"), u64::MAX);
    }

    /// ctl.c's leaves (jemalloc-5.3.0-ctl.txt): name pattern, MIB pattern, guard.
    fn ctl_c_leaves() -> Vec<(String, String, String)> {
        include_str!("jemalloc-5.3.0-ctl.txt")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                assert_eq!(f.len(), 3, "{l}");
                (f[0].to_string(), f[1].to_string(), f[2].to_string())
            })
            .collect()
    }

    /// Whether a guard of ctl.c holds in the build emulated (jemalloc's defaults: statistics,
    /// fill, C++ and background threads on, retain on Linux; profiling, utrace, xmalloc and
    /// UAF detection off).
    fn holds(guard: &str) -> bool {
        guard.split("&&").map(str::trim).all(|g| match g {
            "-"
            | "config_stats"
            | "config_fill"
            | "config_enable_cxx"
            | "have_background_thread"
            | "opt_retain" => true,
            "config_prof"
            | "opt_prof"
            | "opt_prof_stats"
            | "config_utrace"
            | "config_xmalloc"
            | "config_uaf_detection" => false,
            other => panic!("a guard the test does not know: {other}"),
        })
    }

    /// Counts the leaves under `node`.
    fn leaves(node: &Node) -> usize {
        match node {
            Named(c) => c.iter().map(|(_, n)| leaves(n)).sum(),
            Indexed(_, n) => leaves(n),
            Leaf(_) => 1,
        }
    }

    #[test]
    fn the_tree_is_ctl_cs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let all = ctl_c_leaves();
        assert!(all.len() > 390, "{} leaves", all.len());
        assert_eq!(leaves(&ROOT), all.len(), "the emulation's tree has other leaves than ctl.c's");
        for (pattern, mib_pattern, guard) in &all {
            // Each index at the first value its node takes (arena 0, bin 0, ...).
            let expand = |p: &str| {
                p.split('.').map(|e| if e.starts_with('{') { "0" } else { e }).collect::<Vec<_>>().join(".")
            };
            let name = std::ffi::CString::new(expand(pattern)).unwrap();
            let want: Vec<usize> = expand(mib_pattern).split('.').map(|e| e.parse().unwrap()).collect();
            let mut mib = [0usize; 8];
            let mut n = 7usize;
            let rc = unsafe { nametomib(B, name.as_ptr(), mib.as_mut_ptr(), &mut n) };
            if pattern.starts_with("prof.stats.") {
                // Its index function refuses every index without profiling.
                assert_eq!(rc, ENOENT, "{pattern}");
                continue;
            }
            assert_eq!((rc, &mib[..n]), (0, &want[..]), "{pattern}: the MIB is not ctl.c's");
            // A read of 64 bytes: ENOENT exactly where the guard is false in the build.
            let mut buf = [0u8; 64];
            let mut len = buf.len();
            let rc = unsafe {
                mallctl(B, name.as_ptr(), buf.as_mut_ptr() as *mut c_void, &mut len, null_mut(), 0)
            };
            assert_eq!(rc == ENOENT, !holds(guard), "{pattern} (guard {guard}): {rc}");
        }
    }

    #[test]
    fn size_classes_are_the_real_jemallocs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // The shim's own jemalloc (5.3, the same classes on x86-64 with 4 KiB pages).
        let mut names: Vec<String> = [
            "arenas.nbins",
            "arenas.nlextents",
            "arenas.nhbins",
            "arenas.quantum",
            "arenas.page",
            "arenas.tcache_max",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for i in 0..sc::NBINS {
            for f in ["size", "nregs", "slab_size", "nshards"] {
                names.push(format!("arenas.bin.{i}.{f}"));
            }
        }
        for i in 0..sc::NLEXTENTS {
            names.push(format!("arenas.lextent.{i}.size"));
        }
        for n in names {
            let c = std::ffi::CString::new(n.as_str()).unwrap();
            let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
            let (mut la, mut lb) = (8usize, 8usize);
            // The size first (a read of 8 bytes of a 4-byte value is EINVAL, 4 copied).
            let ra = unsafe { mallctl(B, c.as_ptr(), a.as_mut_ptr() as *mut c_void, &mut la, null_mut(), 0) };
            let rb =
                unsafe { je::mallctl(c.as_ptr(), b.as_mut_ptr() as *mut c_void, &mut lb, null_mut(), 0) };
            assert_eq!((ra, la, a), (rb, lb, b), "{n}");
        }
    }

    #[test]
    fn bins_stay_consistent() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        for b in [Backend::Glibc, Backend::Mimalloc, Backend::Snmalloc, Backend::Rpmalloc, Backend::Tcmalloc]
        {
            let get = |name: &str, size: usize| {
                let c = std::ffi::CString::new(name).unwrap();
                let mut v = [0u8; 8];
                let mut l = size;
                let rc =
                    unsafe { mallctl(b, c.as_ptr(), v.as_mut_ptr() as *mut c_void, &mut l, null_mut(), 0) };
                assert_eq!((rc, l), (0, size), "{name} on {b:?}");
                u64::from_ne_bytes(v)
            };
            let mut e = [1u8; 8];
            let mut l = 8;
            let ep = e.as_mut_ptr() as *mut c_void;
            assert_eq!(unsafe { mallctl(b, c"epoch".as_ptr(), ep, &mut l, ep, 8) }, 0);
            let (al, ac, re, ma) = (
                get("stats.allocated", 8),
                get("stats.active", 8),
                get("stats.resident", 8),
                get("stats.mapped", 8),
            );
            assert!(al <= ac && ac <= re && re <= ma, "{b:?}: {al} {ac} {re} {ma}");
            for arena in [0, ARENAS_ALL] {
                let mut small = 0;
                for j in 0..sc::NBINS {
                    let nregs = get(&format!("arenas.bin.{j}.nregs"), 4);
                    let curregs = get(&format!("stats.arenas.{arena}.bins.{j}.curregs"), 8);
                    let curslabs = get(&format!("stats.arenas.{arena}.bins.{j}.curslabs"), 8);
                    assert!(curregs <= nregs * curslabs, "{b:?} bin {j}");
                    small += curregs * get(&format!("arenas.bin.{j}.size"), 8);
                }
                assert_eq!(small, get(&format!("stats.arenas.{arena}.small.allocated"), 8));
                let large = get(&format!("stats.arenas.{arena}.large.allocated"), 8);
                assert_eq!(small + large, al, "{b:?}: small + large is not stats.allocated");
            }
        }
    }

    #[test]
    fn no_profiling_as_the_shims_jemalloc() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // The shim's jemalloc is built without profiling: the names ctl.c guards with
        // config_prof are ENOENT in both, and found by mallctlnametomib in both.
        for (pattern, _, guard) in ctl_c_leaves().iter().filter(|(_, _, g)| g.contains("config_prof")) {
            let name = std::ffi::CString::new(
                pattern.replace("{prof_stats_bins_i}", "0").replace("{prof_stats_lextents_i}", "0"),
            )
            .unwrap();
            let mut buf = [0u8; 64];
            let mut len = 64;
            let e = unsafe {
                mallctl(B, name.as_ptr(), buf.as_mut_ptr() as *mut c_void, &mut len, null_mut(), 0)
            };
            let mut len = 64;
            let r = unsafe {
                je::mallctl(name.as_ptr(), buf.as_mut_ptr() as *mut c_void, &mut len, null_mut(), 0)
            };
            assert_eq!((e, r), (ENOENT, ENOENT), "{pattern} ({guard})");
            let (mut m1, mut m2) = ([0usize; 8], [0usize; 8]);
            let (mut n1, mut n2) = (7usize, 7usize);
            let e = unsafe { nametomib(B, name.as_ptr(), m1.as_mut_ptr(), &mut n1) };
            let r = unsafe { je::mallctlnametomib(name.as_ptr(), m2.as_mut_ptr(), &mut n2) };
            assert_eq!(e, r, "{pattern}: mallctlnametomib");
        }
    }

    #[test]
    fn settings_take_their_value_and_refuse_others() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        unsafe {
            let mut v = 0isize;
            let mut l = 8;
            let vp = &mut v as *mut isize as *mut c_void;
            assert_eq!(mallctl(B, c"arena.0.dirty_decay_ms".as_ptr(), vp, &mut l, null_mut(), 0), 0);
            assert_eq!(v, DIRTY_DECAY_MS);
            assert_eq!(mallctl(B, c"arena.0.dirty_decay_ms".as_ptr(), null_mut(), null_mut(), vp, 8), 0);
            let other = 5isize;
            let op = &other as *const isize as *mut c_void;
            assert_eq!(mallctl(B, c"arena.0.dirty_decay_ms".as_ptr(), null_mut(), null_mut(), op, 8), EFAULT);
            assert_eq!(mallctl(B, c"arena.4096.dirty_decay_ms".as_ptr(), vp, &mut l, null_mut(), 0), EFAULT);
            // arenas.*_decay_ms: the default of arenas made later, none are: kept.
            assert_eq!(mallctl(B, c"arenas.muzzy_decay_ms".as_ptr(), null_mut(), null_mut(), op, 8), 0);
            assert_eq!(mallctl(B, c"arenas.muzzy_decay_ms".as_ptr(), vp, &mut l, null_mut(), 0), 0);
            assert_eq!(v, 5);
            let zero = 0isize;
            mallctl(
                B,
                c"arenas.muzzy_decay_ms".as_ptr(),
                null_mut(),
                null_mut(),
                &zero as *const _ as *mut c_void,
                8,
            );
            // dss: a name jemalloc does not know is EINVAL, another than the backend's EFAULT.
            let bogus = c"nonsense".as_ptr();
            let bp = &bogus as *const _ as *mut c_void;
            assert_eq!(mallctl(B, c"arena.0.dss".as_ptr(), null_mut(), null_mut(), bp, 8), EINVAL);
            let disabled = c"disabled".as_ptr();
            let dp = &disabled as *const _ as *mut c_void;
            assert_eq!(mallctl(B, c"arena.0.dss".as_ptr(), null_mut(), null_mut(), dp, 8), EFAULT);
            let primary = c"primary".as_ptr();
            let pp = &primary as *const _ as *mut c_void;
            assert_eq!(mallctl(B, c"arena.0.dss".as_ptr(), null_mut(), null_mut(), pp, 8), 0);
            // The thread counters: pointers that can be read at any time.
            let mut p = 0usize;
            let mut pl = 8;
            assert_eq!(
                mallctl(
                    B,
                    c"thread.allocatedp".as_ptr(),
                    &mut p as *mut _ as *mut c_void,
                    &mut pl,
                    null_mut(),
                    0
                ),
                0
            );
            assert_eq!(*(p as *const u64), 0);
            assert_eq!(
                mallctl(
                    B,
                    c"experimental.arenas.0.pactivep".as_ptr(),
                    &mut p as *mut _ as *mut c_void,
                    &mut pl,
                    null_mut(),
                    0
                ),
                0
            );
            let _ = *(p as *const usize);
            // batch_alloc fills none; the utilization query says "one region, none free".
            let mut ptrs = [null_mut::<c_void>(); 4];
            let packet: [usize; 4] = [ptrs.as_mut_ptr() as usize, 4, 64, 0];
            let mut filled = 99usize;
            let mut fl = 8;
            assert_eq!(
                mallctl(
                    B,
                    c"experimental.batch_alloc".as_ptr(),
                    &mut filled as *mut _ as *mut c_void,
                    &mut fl,
                    packet.as_ptr() as *mut c_void,
                    32
                ),
                0
            );
            assert_eq!(filled, 0);
            let block = [0u64; 4];
            let bptr = block.as_ptr() as usize;
            let mut out = [9usize; 6];
            let mut ol = 48;
            assert_eq!(
                mallctl(
                    B,
                    c"experimental.utilization.query".as_ptr(),
                    out.as_mut_ptr() as *mut c_void,
                    &mut ol,
                    &bptr as *const _ as *mut c_void,
                    8
                ),
                0
            );
            assert_eq!(out, [0, 0, 1, 0, 0, 0]);
            assert_eq!(defrag_hint(B, bptr as *mut c_void), 0);
        }
    }
}
