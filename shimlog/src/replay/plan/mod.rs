//! The replay plan: one op stream per recorded thread, with every block named by a replay
//! slot instead of its recorded address (built by planner.rs, encoded by codec.rs,
//! replayed by ../run/).
//!
//! The op streams go to one temporary file in chunks of at most [`CHUNK`] bytes; each thread
//! keeps one chunk in memory while planning and the child reads its chunks back with pread.
//! What the children need besides the op file is a [`PlanMeta`], passed as JSON.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[cfg(test)]
mod check;
mod codec;
pub mod planner;

pub use codec::*;

/// Where one chunk of a thread's ops lies in the plan file.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Chunk {
    pub offset: u64,
    pub len: u32,
}

/// One recorded thread's part of the plan.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ThreadPlan {
    pub stream: u32,
    pub tid: u32,
    pub ops: u64,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    pub chunks: Vec<Chunk>,
    /// The log shows its exit (a Join op or a control entry ends it); else it ends with
    /// the replay.
    pub exited: bool,
}

/// Calls in the log that the replay does not make, by reason.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Skipped {
    /// free() of a pointer the log never saw allocated (allocated before capture began).
    pub unknown_free: u64,
    /// realloc()/reallocarray() of a pointer the log never saw allocated: the old block is
    /// skipped and the result is replayed as a fresh block of the new size.
    pub unknown_realloc: u64,
    /// Calls whose recorded result was NULL (failed): replayed as such, i.e. no block.
    pub null_result: u64,
    /// free(NULL): nothing to do.
    pub free_null: u64,
    /// Blocks the log never freed though their address was handed out again (their free was
    /// dropped, or never recorded): they stay allocated for the rest of the replay.
    pub missed_free: u64,
}

/// A thread start or exit that no replay thread hosts (see planner.rs): the child's main
/// thread makes it, in the order of `index`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct LifeOp {
    /// true: start thread `thread`; false: wait for it to end.
    pub start: bool,
    pub thread: u32,
    /// Its place among all thread starts and exits, in log order.
    pub index: u32,
}

/// Everything the children need besides the op file, and what the pre-pass found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PlanMeta {
    pub threads: Vec<ThreadPlan>,
    /// Thread starts and exits the child's main thread makes (those no thread alive then
    /// could host), in index order.
    pub control: Vec<LifeOp>,
    /// Thread starts and exits, all told.
    pub lifecycle_events: u32,
    /// Most recorded threads alive at once (started and not yet exited) in log order.
    pub peak_threads: u32,
    /// Slop (usable minus requested bytes) of every allocation the plan makes, by request
    /// size class, for each backend, from the backend's size classes: computed here, outside
    /// the timed replay.
    pub slop: BTreeMap<String, Vec<super::run::measure::SlopClass>>,
    /// Size of the slot table (blocks the replay may hold at once, plus free slots kept).
    pub slots: u32,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    /// Events read from the log (all kinds).
    pub events: u64,
    /// malloc-family calls in the log.
    pub calls: u64,
    /// Ops the replay makes, by recorded C function.
    pub ops: BTreeMap<String, u64>,
    pub skipped: Skipped,
    /// free() (and realloc to 0 bytes) of a block last allocated by another thread.
    pub cross_thread_frees: u64,
    /// realloc() of a block last allocated by another thread.
    pub cross_thread_reallocs: u64,
    /// Ops that wait for another thread's op on the same slot.
    pub waiting_ops: u64,
    /// reallocs that moved a block whose old address another thread's allocation got first
    /// in log order (a realloc is stamped when it returns, after it freed the old address):
    /// matched to the reallocating thread's own block.
    pub late_realloc_frees: u64,
    /// Peak of live requested bytes in log order: the ideal footprint.
    pub ideal_bytes: u64,
    pub peak_live_blocks: u64,
    pub end_live_bytes: u64,
    pub end_live_blocks: u64,
    /// Events the shim discarded (SHIM_ON_FULL=drop) and calls it served untraced.
    pub dropped_events: u64,
    pub untraced_calls: u64,
    pub page_size: u64,
    /// Bytes of the op file.
    pub plan_bytes: u64,
    /// Problems the reader met (truncation, corrupt frames).
    pub issues: Vec<String>,
}
