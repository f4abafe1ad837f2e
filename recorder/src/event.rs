//! The event model every reader of a log sees.
use serde::Serialize;

/// What happened. Allocation operations are named after their C function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Op {
    Malloc = 1,
    Free = 2,
    Calloc = 3,
    Realloc = 4,
    Reallocarray = 5,
    PosixMemalign = 6,
    AlignedAlloc = 7,
    Memalign = 8,
    Valloc = 9,
    Pvalloc = 10,
    /// A free that names the block's size: C23 `free_sized`, jemalloc's `sdallocx`, C++ sized
    /// `operator delete`, Rust's `dealloc` through tikv-jemallocator (format version 2).
    FreeSized = 11,
    /// First record of a thread's stream: `value` is nothing, `tid` is the kernel thread id.
    ThreadStart = 32,
    ThreadExit = 33,
    /// `value` events of this thread were discarded (SHIM_ON_FULL=drop) just before `ts`.
    Dropped = 34,
    /// Resident set size of the process, `value` bytes.
    Rss = 35,
    /// The thread called fork(); the child writes its own log.
    Fork = 36,
    /// A clock pair: `value` is CLOCK_MONOTONIC in ns at this record's tick count.
    Clock = 37,
    /// `value` calls were served but not recorded (after thread exit or the final flush).
    Untraced = 38,
    /// The process stream's last record: the log was closed cleanly.
    #[default]
    End = 39,
    /// A call the watchdog saw inside the allocator for at least its backend time (over
    /// SHIM_STALL): `size` is the call's op code (0: unknown), `value` its thread (version 3).
    Stall = 40,
    /// One of the allocator's own statistics: `size` names it ([`alloc_stat_name`]), `value`
    /// is its value (version 3).
    AllocStat = 41,
    /// A capture window began or ended: `size` is its number, `value` says how
    /// ([`window_event_name`]) (version 3).
    Window = 42,
    /// Watched thread activity: `size` 0 a thread started, 1 it ended, 2 it forked;
    /// `value` the thread (version 3).
    ThreadSeen = 43,
    /// A call stack's header (version 4): `size` is its id (1, 2, ...), `value` its depth;
    /// `value` [`Op::StackPc`] records of the same id follow in the same stream.
    Stack = 44,
    /// One frame of stack `size`: `value` is a return address (the innermost first).
    StackPc = 45,
    /// The call record just before this one in the same stream was made from stack `size`
    /// (0: the stack table was full); `value` says why it was taken ([`site_flags`]).
    Site = 46,
    /// A loaded object's executable range: `size` start, `value` end (absolute addresses).
    /// [`Op::MappingBias`], [`Op::MappingPath`] and [`Op::MappingBuildId`] records follow.
    Mapping = 47,
    /// The last mapping's load bias: `value` (an address minus it is the ELF address).
    MappingBias = 48,
    /// 8 bytes (little-endian in `value`) of the last mapping's path, `size` its length.
    MappingPath = 49,
    /// 8 bytes of the last mapping's build id, `size` its length in bytes.
    MappingBuildId = 50,
    /// How the process ended, written before `End` by a clean close: `size` says how
    /// ([`exit_how_name`]: exit or return from main, `_exit`, exec), `value` the exit status
    /// (version 4).
    Exit = 52,
    /// Appended by recovery (`shimlog recover`): `value` records of the process's in-flight
    /// buffers reached the log after it died; `size` what the in-flight file knew of the end
    /// ([`recovered_end_name`]) (version 4).
    Recovered = 53,
}

/// [`Op::Exit`] `size` values: how the process ended.
pub mod exit_how {
    /// `exit()` or a return from main (atexit and on_exit handlers ran).
    pub const EXIT: u64 = 0;
    /// `_exit()` or `_Exit()` (no handler ran).
    pub const UNDERSCORE_EXIT: u64 = 1;
    /// An `exec` replaced the program (the new image writes its own log).
    pub const EXEC: u64 = 2;
}

/// What an [`Op::Exit`] `size` means.
pub fn exit_how_name(v: u64) -> &'static str {
    match v {
        exit_how::EXIT => "exit",
        exit_how::UNDERSCORE_EXIT => "_exit",
        exit_how::EXEC => "exec",
        _ => "unknown",
    }
}

/// [`Op::Recovered`] `size` values: what the in-flight file said of the process's end.
pub mod recovered_end {
    /// Nothing: a signal's default action, SIGKILL or the OOM killer ended it.
    pub const KILLED: u64 = 0;
    /// The program called `abort()` (SIGABRT).
    pub const ABORT: u64 = 1;
}

/// What an [`Op::Recovered`] `size` means.
pub fn recovered_end_name(v: u64) -> &'static str {
    match v {
        recovered_end::ABORT => "abort() called (SIGABRT)",
        _ => "killed (no end record): a signal, SIGKILL or the OOM killer",
    }
}

/// Why a stack was taken ([`Op::Site`] values, bits).
pub mod site_flags {
    /// The allocation was sampled (SHIM_STACKS=sample: by bytes, mean in the header).
    pub const SAMPLED: u64 = 1;
    /// The call stayed inside the allocator over SHIM_STALL.
    pub const SLOW: u64 = 2;
    /// SHIM_STACKS=all: every allocation has its stack.
    pub const ALL: u64 = 4;
}

/// Names of the [`Op::AllocStat`] statistics, by their code (index).
pub const ALLOC_STAT_NAMES: [&str; 29] = [
    "unknown",
    "allocated",
    "active",
    "resident",
    "mapped",
    "metadata",
    "retained",
    "current_commit",
    "peak_commit",
    "page_faults",
    "arena",
    "mmapped",
    "in_use",
    "free",
    "releasable",
    // gperftools' tcmalloc (MallocExtension properties; "allocated" above too).
    "heap_size",
    "physical",
    "pageheap_free",
    "pageheap_unmapped",
    "central_cache_free",
    "transfer_cache_free",
    "thread_cache_free",
    // snmalloc.
    "reserved",
    "peak_reserved",
    // rpmalloc's global statistics ("mapped" above too).
    "mapped_peak",
    "cached",
    "huge_alloc",
    "mapped_total",
    "unmapped_total",
];

/// The name of an [`Op::AllocStat`] code.
pub fn alloc_stat_name(code: u64) -> &'static str {
    ALLOC_STAT_NAMES.get(code as usize).copied().unwrap_or("unknown")
}

/// The code of an allocator statistic's name (0: unknown).
pub fn alloc_stat_code(name: &str) -> u64 {
    ALLOC_STAT_NAMES.iter().position(|n| *n == name).unwrap_or(0) as u64
}

/// [`Op::Window`] values: a window started (below 16) or ended (16 and up), and why.
pub mod window_event {
    pub const START_SCHEDULE: u64 = 0;
    pub const START_DEMAND: u64 = 1;
    pub const START_SIGNAL: u64 = 2;
    pub const END_LENGTH: u64 = 16;
    pub const END_DEMAND: u64 = 17;
    pub const END_LIMIT: u64 = 18;
    pub const END_WRITE_ERROR: u64 = 19;
    pub const END_EXIT: u64 = 20;
    pub const END_SIGNAL: u64 = 21;
    /// The window's log was deleted to stay under SHIM_LOG_LIMIT (SHIM_LOG_FULL=rotate).
    pub const DELETED: u64 = 32;
    /// SHIM_LOG_LIMIT was reached (SHIM_LOG_FULL=stop): no more windows.
    pub const LIMIT_STOP: u64 = 33;
    /// This process removed a dead process's in-flight file (`size`: that process's pid)
    /// without recovering it (crate::reclaim): its log is gone.
    pub const INFLIGHT_LOG_GONE: u64 = 34;
    /// ... its log could not be written.
    pub const INFLIGHT_LOG_UNWRITABLE: u64 = 35;
    /// ... it held no header (its process died while making it): nothing was lost.
    pub const INFLIGHT_EMPTY: u64 = 36;
}

/// What an [`Op::Window`] value means.
pub fn window_event_name(v: u64) -> &'static str {
    use window_event::*;
    match v {
        START_SCHEDULE => "started (schedule)",
        START_DEMAND => "started (on demand)",
        START_SIGNAL => "started (signal)",
        END_LENGTH => "its length elapsed",
        END_DEMAND => "stopped on demand",
        END_LIMIT => "log limit reached",
        END_WRITE_ERROR => "write error",
        END_EXIT => "process exit",
        END_SIGNAL => "stopped by signal",
        DELETED => "its log deleted (rotation)",
        LIMIT_STOP => "log limit reached: no more windows",
        INFLIGHT_LOG_GONE => "its in-flight file removed: its log is gone (its records are lost)",
        INFLIGHT_LOG_UNWRITABLE => {
            "its in-flight file removed: its log cannot be written (its records are lost)"
        }
        INFLIGHT_EMPTY => "its in-flight file removed: it held nothing (the process died making it)",
        _ => "unknown",
    }
}

impl Op {
    pub const ALLOC_OPS: [Op; 11] = [
        Op::Malloc,
        Op::Free,
        Op::Calloc,
        Op::Realloc,
        Op::Reallocarray,
        Op::PosixMemalign,
        Op::AlignedAlloc,
        Op::Memalign,
        Op::Valloc,
        Op::Pvalloc,
        Op::FreeSized,
    ];

    /// Bytes a call of this op asked for: `count * size` for the array forms (calloc,
    /// reallocarray), else `size`. The one definition the shim's hot path
    /// ([`crate::buffer::Args::requested`]) and the readers ([`Event::requested`]) share.
    #[inline(always)]
    pub fn requested(self, count: u64, size: u64) -> u64 {
        if matches!(self, Op::Calloc | Op::Reallocarray) {
            count.saturating_mul(size)
        } else {
            size
        }
    }

    pub fn from_u8(v: u8) -> Option<Op> {
        use Op::*;
        Some(match v {
            1 => Malloc,
            2 => Free,
            3 => Calloc,
            4 => Realloc,
            5 => Reallocarray,
            6 => PosixMemalign,
            7 => AlignedAlloc,
            8 => Memalign,
            9 => Valloc,
            10 => Pvalloc,
            11 => FreeSized,
            32 => ThreadStart,
            33 => ThreadExit,
            34 => Dropped,
            35 => Rss,
            36 => Fork,
            37 => Clock,
            38 => Untraced,
            39 => End,
            40 => Stall,
            41 => AllocStat,
            42 => Window,
            43 => ThreadSeen,
            44 => Stack,
            45 => StackPc,
            46 => Site,
            47 => Mapping,
            48 => MappingBias,
            49 => MappingPath,
            50 => MappingBuildId,
            52 => Exit,
            53 => Recovered,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        use Op::*;
        match self {
            Malloc => "malloc",
            Free => "free",
            Calloc => "calloc",
            Realloc => "realloc",
            Reallocarray => "reallocarray",
            PosixMemalign => "posix_memalign",
            AlignedAlloc => "aligned_alloc",
            Memalign => "memalign",
            Valloc => "valloc",
            Pvalloc => "pvalloc",
            FreeSized => "free_sized",
            ThreadStart => "thread_start",
            ThreadExit => "thread_exit",
            Dropped => "dropped",
            Rss => "rss",
            Fork => "fork",
            Clock => "clock",
            Untraced => "untraced",
            End => "end",
            Stall => "stall",
            AllocStat => "alloc_stat",
            Window => "window",
            ThreadSeen => "thread_seen",
            Stack => "stack",
            StackPc => "stack_pc",
            Site => "site",
            Mapping => "mapping",
            MappingBias => "mapping_bias",
            MappingPath => "mapping_path",
            MappingBuildId => "mapping_build_id",
            Exit => "exit",
            Recovered => "recovered",
        }
    }

    /// A malloc-family call (as opposed to a thread, process or clock record).
    pub fn is_alloc_family(self) -> bool {
        (self as u8) <= 11
    }

    /// Returns a block (its `ptr` is the result).
    pub fn allocates(self) -> bool {
        self.is_alloc_family() && !self.is_free()
    }

    /// Takes an old block (`old` for realloc/reallocarray, `ptr` for free).
    pub fn frees(self) -> bool {
        matches!(self, Op::Free | Op::FreeSized | Op::Realloc | Op::Reallocarray)
    }

    /// Only frees (`free`, `free_sized`): its `ptr` is the block released.
    #[inline(always)]
    pub fn is_free(self) -> bool {
        matches!(self, Op::Free | Op::FreeSized)
    }

    /// Which argument fields the record carries, in their on-disk order (before `ptr`).
    pub(crate) fn layout(self) -> &'static [Field] {
        use Field::*;
        use Op::*;
        match self {
            Malloc | Valloc | Pvalloc | FreeSized => &[Size, Ptr],
            Free => &[Ptr],
            Calloc => &[Count, Size, Ptr],
            Realloc => &[Old, Size, Ptr],
            Reallocarray => &[Old, Count, Size, Ptr],
            PosixMemalign | AlignedAlloc | Memalign => &[Align, Size, Ptr],
            ThreadStart => &[Tid],
            ThreadExit | Fork => &[],
            Dropped | Rss | Clock | Untraced | End => &[Value],
            Stall | AllocStat | Window | ThreadSeen | Exit | Recovered => &[Size, Value],
            Stack | StackPc | Site | Mapping | MappingBias | MappingPath | MappingBuildId => &[Size, Value],
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    Size,
    Count,
    Align,
    Old,
    Ptr,
    Value,
    Tid,
}

/// One record of a log, as the reader hands it out (times already in nanoseconds).
///
/// One cache line: every analysis reads hundreds of millions of these, so the arguments
/// that no op has together (element count, alignment, a record's value) share `arg`, and
/// an untimed call's backend time is a reserved value rather than an `Option`. Read them
/// with [`Event::count`], [`Event::align`], [`Event::value`] and [`Event::backend_ns`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Event {
    /// Nanoseconds since the log's reference point (the shim's initialisation).
    pub ts_ns: u64,
    /// Result pointer (0 for a failed allocation); the pointer freed for `free`.
    pub ptr: u64,
    /// Requested size (element size for calloc and reallocarray).
    pub size: u64,
    /// The pointer passed to realloc/reallocarray.
    pub old: u64,
    /// The element count (calloc, reallocarray), the alignment (posix_memalign,
    /// aligned_alloc, memalign), or the record's value (thread_start: the tid; dropped: the
    /// events dropped; rss: bytes; ...); 0 for other ops.
    pub arg: u64,
    /// Nanoseconds spent inside the backend call, [`Event::NOT_TIMED`] when not measured.
    pub backend: u64,
    /// Kernel thread id of the thread that made the call (0 for process records).
    pub tid: u32,
    /// The stream the record came from: 0 for process records, one per thread otherwise.
    pub stream: u32,
    pub op: Op,
}

impl Default for Event {
    fn default() -> Self {
        Event {
            ts_ns: 0,
            ptr: 0,
            size: 0,
            old: 0,
            arg: 0,
            backend: Event::NOT_TIMED,
            tid: 0,
            stream: 0,
            op: Op::default(),
        }
    }
}

impl Event {
    /// `backend` of a call whose backend time was not measured.
    pub const NOT_TIMED: u64 = u64::MAX;

    /// Bytes the call asked for (count * size for the array forms).
    #[inline(always)]
    pub fn requested(&self) -> u64 {
        self.op.requested(self.arg, self.size)
    }

    /// Element count for calloc and reallocarray, else 0.
    #[inline(always)]
    pub fn count(&self) -> u64 {
        if matches!(self.op, Op::Calloc | Op::Reallocarray) {
            self.arg
        } else {
            0
        }
    }

    /// Alignment asked of posix_memalign, aligned_alloc and memalign, else 0.
    #[inline(always)]
    pub fn align(&self) -> u64 {
        if matches!(self.op, Op::PosixMemalign | Op::AlignedAlloc | Op::Memalign) {
            self.arg
        } else {
            0
        }
    }

    /// Record-specific value of a thread, process or clock record (tid for thread_start,
    /// dropped count, RSS bytes...); 0 for a malloc-family call.
    #[inline(always)]
    pub fn value(&self) -> u64 {
        if self.op.is_alloc_family() {
            0
        } else {
            self.arg
        }
    }

    /// Time spent inside the backend call, when it was measured.
    #[inline(always)]
    pub fn backend_ns(&self) -> Option<u64> {
        (self.backend != Event::NOT_TIMED).then_some(self.backend)
    }
}
