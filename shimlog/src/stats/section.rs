//! One section of the report (a process, or the total of several): what `--json` prints
//! and what the human report is rendered from.
use super::latency::LatencyReport;
use super::lifetimes::LifetimesReport;
use super::memory::MemoryReport;
use super::sizes::SizesReport;
use super::slop::BackendSlop;
use super::threads::ThreadsReport;
use super::totals::TotalsReport;
use recorder::ReadIssue;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize, Clone, Debug)]
pub struct Section {
    /// The log's path (absent in a total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    /// Logs (processes) in this section.
    pub processes: u64,
    /// The backend that served the calls ("a, b" when processes differ).
    pub backend: String,
    pub read: ReadReport,
    #[serde(flatten)]
    pub totals: TotalsReport,
    /// The most bytes live at once, and when (ns since the log's start).
    pub peak_live_bytes: u64,
    pub peak_live_blocks: u64,
    pub peak_live_at_ns: u64,
    pub live_at_end: LiveAtEnd,
    pub unknown_frees: u64,
    /// Fork children read with their parent's log: their frees of blocks inherited at the
    /// fork (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inherited: Option<super::inherit::InheritedReport>,
    pub address_reuse_conflicts: u64,
    pub sizes: SizesReport,
    /// Keyed by backend name.
    pub slop: BTreeMap<&'static str, BackendSlop>,
    pub lifetimes: LifetimesReport,
    #[serde(flatten)]
    pub threads_detail: ThreadsReport,
    pub memory: MemoryReport,
    pub latency: LatencyReport,
    /// With capture windows: which window this log is, and the watch log's timeline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch: Option<super::watch::WatchReport>,
    /// Call sites, for a log written with stacks (SHIM_STACKS); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sites: Option<crate::sites::SitesReport>,
    /// The same stacks folded for flame graphs (the report draws them; not in --json).
    #[serde(skip)]
    pub folded: Option<crate::flamegraph::Folded>,
}

#[derive(Serialize, Clone, Debug)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub forked: bool,
    pub exe: String,
    pub cmdline: Vec<String>,
    pub backend_version: String,
    /// SHIM_TIMING and SHIM_ON_FULL as in force.
    pub timing: String,
    pub on_full: String,
    pub clock: String,
    pub start_unix_ns: u64,
    /// Allocators linked into the program, and whether the shim recorded them or switched
    /// them to `backend` (the log header's own_allocators).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub own_allocators: Vec<recorder::format::OwnAllocator>,
    /// How the process ended: `how` is `exit` (with `call`: exit, _exit or exec, and
    /// `status`), `closed` (status not recorded), `recovered` (it died; `end` says what is
    /// known, `records` were recovered from its in-flight buffers) or `no_end`.
    pub ended: recorder::Ending,
    /// In a fork child's log: the parent's log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_log: Option<String>,
    /// SHIM_RECORD=sample: the sampling mean in bytes. Only the sampled allocations, their
    /// frees and the slow calls are in the log: the totals count those.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled_only: Option<u64>,
}

#[derive(Serialize, Clone, Copy, Debug)]
pub struct LiveAtEnd {
    pub blocks: u64,
    pub bytes: u64,
}

#[derive(Serialize, Clone, Debug, Default)]
pub struct ReadReport {
    /// The log ends with the shim's End record (the process closed it).
    pub clean_end: bool,
    /// Calls stamped after the final flush's cut (made while threads were stopping at
    /// exit), left out so that the log reads as one consistent moment of the process.
    pub calls_after_cut: u64,
    pub frames: u64,
    /// Of them, stored by column (format version 5; the rest are rows).
    pub columnar_frames: u64,
    pub compressed_bytes: u64,
    pub file_bytes: u64,
    /// What was wrong with the file and how the reader went on.
    pub issues: Vec<Issue>,
}

#[derive(Serialize, Clone, Debug)]
pub struct Issue {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// "truncated", "corrupt_header" or "corrupt_frame".
    pub kind: &'static str,
    /// Byte offset in the file.
    pub offset: u64,
    pub message: String,
}

impl Issue {
    pub fn of(i: &ReadIssue, log: Option<String>) -> Issue {
        let (kind, offset) = match i {
            ReadIssue::Truncated { offset } => ("truncated", *offset),
            ReadIssue::CorruptHeader { offset, .. } => ("corrupt_header", *offset),
            ReadIssue::CorruptFrame { offset, .. } => ("corrupt_frame", *offset),
        };
        Issue {
            log,
            kind,
            offset,
            message: i.to_string(),
        }
    }
}
