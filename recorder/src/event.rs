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
}

impl Op {
    pub const ALLOC_OPS: [Op; 10] = [
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
    ];

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
            32 => ThreadStart,
            33 => ThreadExit,
            34 => Dropped,
            35 => Rss,
            36 => Fork,
            37 => Clock,
            38 => Untraced,
            39 => End,
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
            ThreadStart => "thread_start",
            ThreadExit => "thread_exit",
            Dropped => "dropped",
            Rss => "rss",
            Fork => "fork",
            Clock => "clock",
            Untraced => "untraced",
            End => "end",
        }
    }

    /// A malloc-family call (as opposed to a thread, process or clock record).
    pub fn is_alloc_family(self) -> bool {
        (self as u8) <= 10
    }

    /// Returns a block (its `ptr` is the result).
    pub fn allocates(self) -> bool {
        self.is_alloc_family() && self != Op::Free
    }

    /// Takes an old block (`old` for realloc/reallocarray, `ptr` for free).
    pub fn frees(self) -> bool {
        matches!(self, Op::Free | Op::Realloc | Op::Reallocarray)
    }

    /// Which argument fields the record carries, in their on-disk order (before `ptr`).
    pub(crate) fn layout(self) -> &'static [Field] {
        use Field::*;
        use Op::*;
        match self {
            Malloc | Valloc | Pvalloc => &[Size, Ptr],
            Free => &[Ptr],
            Calloc => &[Count, Size, Ptr],
            Realloc => &[Old, Size, Ptr],
            Reallocarray => &[Old, Count, Size, Ptr],
            PosixMemalign | AlignedAlloc | Memalign => &[Align, Size, Ptr],
            ThreadStart => &[Tid],
            ThreadExit | Fork => &[],
            Dropped | Rss | Clock | Untraced | End => &[Value],
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Nanoseconds since the log's reference point (the shim's initialisation).
    pub ts_ns: u64,
    /// Kernel thread id of the thread that made the call (0 for process records).
    pub tid: u32,
    /// The stream the record came from: 0 for process records, one per thread otherwise.
    pub stream: u32,
    pub op: Op,
    /// Result pointer (0 for a failed allocation); the pointer freed for `free`.
    pub ptr: u64,
    /// Requested size (element size for calloc and reallocarray).
    pub size: u64,
    /// Element count for calloc and reallocarray.
    pub count: u64,
    pub align: u64,
    /// The pointer passed to realloc/reallocarray.
    pub old: u64,
    /// Record-specific value: tid for thread_start, dropped count, RSS bytes...
    pub value: u64,
    /// Time spent inside the backend call, when it was measured.
    pub backend_ns: Option<u64>,
}

impl Event {
    /// Bytes the call asked for (count * size for the array forms).
    pub fn requested(&self) -> u64 {
        match self.op {
            Op::Calloc | Op::Reallocarray => self.count.saturating_mul(self.size),
            _ => self.size,
        }
    }
}
