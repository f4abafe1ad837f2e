//! One section of the report (a process, or the total of several): what `stats --json`
//! prints and what the human report and `shimlog report`'s page are rendered from; and how
//! a section is made from a process's analysis ([`of_process`]) or from the analyses of
//! several logs read together and their tracker ([`of_total`]).
use super::classes::SizeTable;
use super::inherit::InheritedReport;
use super::latency::LatencyReport;
use super::lifetimes::{LifetimesReport, NeverFreed};
use super::memory::MemoryReport;
use super::process::Analysis;
use super::sites::{self, Folded, SitesReport};
use super::sizes::SizesReport;
use super::slop::{self, BackendSlop};
use super::threads::ThreadsReport;
use super::totals::TotalsReport;
use super::tracker::Tracker;
use recorder::{LogReader, ReadIssue};
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
    pub inherited: Option<InheritedReport>,
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
    pub sites: Option<SitesReport>,
    /// The same stacks folded for flame graphs (the report draws them; not in --json).
    #[serde(skip)]
    pub folded: Option<Folded>,
    /// Blocks made and live at the peak per distinct request size (`stats --classes`; not in --json).
    #[serde(skip)]
    pub size_mix: Vec<super::whatif::SizeCount>,
}

#[derive(Serialize, Clone, Debug)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub forked: bool,
    /// The program as started (argv[0]'s file name), the resolved executable beside it
    /// where they differ: `redis-server (/usr/bin/redis-check-rdb)` (crate::name).
    pub program: String,
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
        Issue { log, kind, offset, message: i.to_string() }
    }
}

/// What the call-site section needs: where the binaries are, the wrappers, and how many
/// sites to list.
pub struct SiteOptions<'a> {
    pub binaries: Option<&'a std::path::Path>,
    /// The program's allocation wrappers (`--alloc-fn`), folded into their callers.
    pub alloc_fn: &'a super::sites::AllocFns,
    pub top: u64,
    /// The call sites from a second pass over each log, as before they were taken in the
    /// analysis' own pass (`--two-pass-sites`, hidden: the tests compare the two).
    pub two_pass: bool,
}

pub(super) fn of_process(
    path: &str,
    r: &LogReader,
    a: &mut Analysis,
    read: ReadReport,
    t: &mut SizeTable,
    args: &SiteOptions,
) -> Section {
    let h = &r.header;
    // Call sites, for logs with stacks only: taken in the pass (or, with `two_pass`, from a
    // second pass over the log).
    let p = match (sites::has_stacks(r), a.stacks.take()) {
        (true, Some(k)) => {
            let c = k.finish(Some((a.heap.peak_bytes, a.heap.peak_ts_ns)));
            Some(sites::profile_of(c, r, args.binaries, args.alloc_fn))
        }
        (true, None) => Some(sites::profile(r, args.binaries, args.alloc_fn)),
        (false, _) => None,
    };
    let (sites, folded) = match p {
        Some(p) => (Some(SitesReport::of(&p, args.top as usize)), Some(Folded::of(&p))),
        None => (None, None),
    };
    let a = &*a;
    let never = NeverFreed::of(&a.sizes, t);
    Section {
        log: Some(path.to_string()),
        process: Some(Process {
            pid: h.pid,
            ppid: h.ppid,
            forked: h.forked,
            program: crate::name::shown(&h.exe, &h.cmdline),
            exe: h.exe.clone(),
            cmdline: h.cmdline.clone(),
            backend_version: h.backend_version.clone(),
            timing: h.timing.clone(),
            on_full: h.on_full.clone(),
            clock: h.clock.clone(),
            start_unix_ns: h.start_unix_ns,
            own_allocators: h.own_allocators.clone(),
            ended: r.ending,
            parent_log: h.parent_log.clone(),
            sampled_only: h.record.as_deref().filter(|r| *r == "sample").map(|_| h.sample_bytes.unwrap_or(0)),
        }),
        processes: 1,
        backend: h.backend.clone(),
        read,
        totals: a.totals.report(&a.threads),
        peak_live_bytes: a.heap.peak_bytes,
        peak_live_blocks: a.heap.peak_blocks,
        peak_live_at_ns: a.heap.peak_ts_ns,
        live_at_end: LiveAtEnd { blocks: a.heap.blocks(), bytes: a.heap.live_bytes },
        unknown_frees: a.heap.unknown_frees,
        inherited: a.inherited(),
        address_reuse_conflicts: a.heap.address_reuse_conflicts,
        sizes: a.sizes.report(t),
        slop: slop::report(t, &a.sizes, &a.sizes, a.heap.peak_bytes),
        lifetimes: a.life.report(a.heap.allocs, &never, t),
        threads_detail: a.threads.report(),
        memory: a.mem.report(a.totals.last_ns, a.heap.live_bytes, a.heap.blocks()),
        latency: a.lat.report(),
        watch: a.watch.report(h.window),
        sites,
        folded,
        size_mix: super::whatif::mix(t, &a.sizes, &a.sizes),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn of_total(
    paths: &[String],
    rs: &[LogReader],
    an: &[Analysis],
    offsets: &[u64],
    sections: &[Section],
    tr: &Tracker,
    t: &mut SizeTable,
    burst: u64,
) -> Section {
    let mut m = Analysis::new(0, burst);
    let never = NeverFreed::of(&tr.sizes, t);
    let (mut unknown, mut conflicts, mut allocs) = (0, 0, 0);
    let mut inherited: Option<InheritedReport> = None;
    for (i, a) in an.iter().enumerate() {
        if let Some(r) = a.inherited() {
            let t = inherited.get_or_insert_with(Default::default);
            let age = t.mean_age_ns as u128 * t.frees as u128 + r.mean_age_ns as u128 * r.frees as u128;
            t.blocks_at_fork += r.blocks_at_fork;
            t.frees += r.frees;
            t.bytes_freed += r.bytes_freed;
            t.mean_age_ns = age.checked_div(t.frees as u128).unwrap_or(0) as u64;
        }
        m.totals.merge(&a.totals, offsets[i]);
        m.sizes.merge(&a.sizes);
        m.life.merge(&a.life);
        m.threads.merge(&a.threads, offsets[i]);
        m.lat.merge(&a.lat, offsets[i]);
        unknown += a.heap.unknown_frees;
        conflicts += a.heap.address_reuse_conflicts;
        allocs += a.heap.allocs;
    }
    let mut backends: Vec<&str> = rs.iter().map(|r| r.header.backend.as_str()).collect();
    backends.sort();
    backends.dedup();
    let mut read = ReadReport { clean_end: sections.iter().all(|s| s.read.clean_end), ..Default::default() };
    for (i, s) in sections.iter().enumerate() {
        read.frames += s.read.frames;
        read.columnar_frames += s.read.columnar_frames;
        read.calls_after_cut += s.read.calls_after_cut;
        read.compressed_bytes += s.read.compressed_bytes;
        read.file_bytes += s.read.file_bytes;
        for is in &s.read.issues {
            read.issues.push(Issue { log: Some(paths[i].clone()), ..is.clone() });
        }
    }
    Section {
        log: None,
        process: None,
        processes: rs.len() as u64,
        backend: backends.join(", "),
        read,
        totals: m.totals.report(&m.threads),
        peak_live_bytes: tr.peak_bytes,
        peak_live_blocks: tr.peak_blocks,
        peak_live_at_ns: tr.peak_ts,
        live_at_end: LiveAtEnd { blocks: tr.live_blocks, bytes: tr.live_bytes },
        unknown_frees: unknown,
        inherited,
        address_reuse_conflicts: conflicts,
        sizes: m.sizes.report(t),
        slop: slop::report(t, &m.sizes, &tr.sizes, tr.peak_bytes),
        lifetimes: m.life.report(allocs, &never, t),
        threads_detail: m.threads.report(),
        memory: tr.mem.report(m.totals.last_ns, tr.live_bytes, tr.live_blocks),
        latency: m.lat.report(),
        watch: None,
        sites: None,
        folded: None,
        size_mix: super::whatif::mix(t, &m.sizes, &tr.sizes),
    }
}
