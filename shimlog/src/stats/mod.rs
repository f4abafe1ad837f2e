//! `shimlog stats LOG... [--json] [--burst N] [--one-thread]`: what a captured workload did.
//!
//! One streaming pass over each log (memory proportional to the blocks live at once, not
//! to the events), sections: totals, request sizes, size-class waste per backend,
//! lifetimes, threads (cross-thread frees, free bursts), memory over time and latency
//! inside the allocator. Several logs give one section per process, then their total.
//! `--json` prints the same data as one document: the total's section at the top level
//! (a single log's own section when there is one log), with `logs` holding each
//! process's section when there are several.
pub(crate) mod analysis;
pub(crate) mod blocks;
pub(crate) mod classes;
pub(crate) mod drive;
mod fasthist;
pub(crate) mod heap;
mod inherit;
pub(crate) mod latency;
mod lifetimes;
mod memory;
mod report;
pub(crate) mod section;
mod sizes;
mod slop;
pub(crate) mod threads;
mod total;
mod totals;
pub(crate) mod units;
mod watch;

use analysis::Analysis;
use classes::SizeTable;
use lifetimes::NeverFreed;
use recorder::LogReader;
use section::{LiveAtEnd, Process, ReadReport, Section};
use serde::Serialize;
use std::io::Write;
use total::Tracker;

#[derive(clap::Args)]
pub struct Args {
    /// Logs to analyse (a parent and its children: one section each, then the total).
    #[arg(required = true)]
    pub logs: Vec<String>,
    /// One JSON document instead of the human report.
    #[arg(long)]
    pub json: bool,
    /// A free burst is a run of at least this many frees on one thread with no allocation
    /// in between.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub burst: u64,
    /// Read and analyse on one thread. By default the logs are read (decompressed, decoded,
    /// their threads merged) on a second thread, when there is a second CPU.
    #[arg(long)]
    pub one_thread: bool,
    /// Where to find the program's binaries (or their debug files) for the call sites'
    /// symbols, by file name; by default the paths the log names.
    #[arg(long, value_name = "DIR")]
    pub binaries: Option<std::path::PathBuf>,
    /// How many call sites each list shows.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub top: u64,
}

/// The JSON document for several logs.
#[derive(Serialize)]
struct Document<'a> {
    #[serde(flatten)]
    total: &'a Section,
    logs: &'a [Section],
}

/// What one pass over the logs found: each log's section (none for one log), the total's
/// (the one log's own section when there is one), and each log's analysis (for what the
/// sections do not carry: `shimlog report` draws the latency CDFs and the thread matrix from them).
pub(crate) struct Analysed {
    pub sections: Vec<Section>,
    pub total: Section,
    pub analyses: Vec<Analysis>,
    /// Where each log's time 0 lies on the total's clock.
    pub offsets: Vec<u64>,
}

/// What the call-site section needs: where the binaries are, and how many sites to list.
pub(crate) struct SiteOptions<'a> {
    pub binaries: Option<&'a std::path::Path>,
    pub top: u64,
}

pub(crate) fn analyse(logs: &[String], burst: u64, two: bool, so: &SiteOptions) -> Result<Analysed, String> {
    let readers: Vec<LogReader> = logs
        .iter()
        .map(|p| crate::open::open(p))
        .collect::<Result<_, _>>()?;
    let mut table = SizeTable::default();
    let progress = drive::Progress::new(readers.iter().map(|r| r.compressed_bytes()).sum());
    let mut an: Vec<Analysis> = readers
        .iter()
        .map(|r| Analysis::new(r.header.pid, burst))
        .collect();
    let mut sections = Vec::new();
    let mut offsets = vec![0];
    let total = if readers.len() == 1 {
        let read = drive::one(&readers[0], &mut an[0], &mut table, &progress, two);
        progress.done();
        process_section(&logs[0], &readers[0], &an[0], read, &mut table, so)
    } else {
        let base = readers
            .iter()
            .map(|r| r.header.start_mono_ns)
            .min()
            .unwrap_or(0);
        offsets = readers
            .iter()
            .map(|r| r.header.start_mono_ns - base)
            .collect();
        let mut tracker = Tracker::new(readers.len());
        let reads = drive::many(
            &readers,
            &offsets,
            &mut an,
            &mut table,
            &mut tracker,
            &progress,
            two,
        );
        progress.done();
        for (i, read) in reads.into_iter().enumerate() {
            sections.push(process_section(
                &logs[i],
                &readers[i],
                &an[i],
                read,
                &mut table,
                so,
            ));
        }
        total_section(
            logs, &readers, &an, &offsets, &sections, &tracker, &mut table, burst,
        )
    };
    Ok(Analysed { sections, total, analyses: an, offsets })
}

pub fn run(a: Args) -> Result<i32, String> {
    let so = SiteOptions { binaries: a.binaries.as_deref(), top: a.top };
    let Analysed { sections, total, .. } = analyse(&a.logs, a.burst, !a.one_thread, &so)?;
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    let r = if a.json {
        let doc = if sections.is_empty() {
            serde_json::to_writer_pretty(&mut w, &total)
        } else {
            serde_json::to_writer_pretty(
                &mut w,
                &Document {
                    total: &total,
                    logs: &sections,
                },
            )
        };
        doc.map_err(|e| e.to_string())
            .and_then(|_| writeln!(w).map_err(|e| e.to_string()))
    } else {
        report::write(&mut w, &sections, &total).map_err(|e| e.to_string())
    };
    match r.and_then(|_| w.flush().map_err(|e| e.to_string())) {
        Ok(()) => Ok(0),
        // A closed pipe (shimlog stats | head) is not an error.
        Err(e) if e.contains("Broken pipe") => Ok(0),
        Err(e) => Err(format!("stats: writing the report: {e}")),
    }
}

fn process_section(
    path: &str,
    r: &LogReader,
    a: &Analysis,
    read: ReadReport,
    t: &mut SizeTable,
    args: &SiteOptions,
) -> Section {
    let h = &r.header;
    // Call sites: a second pass over the log, for logs with stacks only.
    let (sites, folded) = match crate::sites::has_stacks(r) {
        true => {
            let p = crate::sites::profile(r, args.binaries);
            (Some(crate::sites::SitesReport::of(&p, args.top as usize)), Some(crate::flamegraph::Folded::of(&p)))
        }
        false => (None, None),
    };
    let never = NeverFreed::of(&a.sizes, t);
    Section {
        log: Some(path.to_string()),
        process: Some(Process {
            pid: h.pid,
            ppid: h.ppid,
            forked: h.forked,
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
        live_at_end: LiveAtEnd {
            blocks: a.heap.blocks(),
            bytes: a.heap.live_bytes,
        },
        unknown_frees: a.heap.unknown_frees,
        inherited: a.inherited(),
        address_reuse_conflicts: a.heap.address_reuse_conflicts,
        sizes: a.sizes.report(t),
        slop: slop::report(t, &a.sizes, &a.sizes, a.heap.peak_bytes),
        lifetimes: a.life.report(a.heap.allocs, &never, t),
        threads_detail: a.threads.report(),
        memory: a
            .mem
            .report(a.totals.last_ns, a.heap.live_bytes, a.heap.blocks()),
        latency: a.lat.report(),
        watch: a.watch.report(h.window),
        sites,
        folded,
    }
}

#[allow(clippy::too_many_arguments)]
fn total_section(
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
    let mut inherited: Option<inherit::InheritedReport> = None;
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
    let mut read = ReadReport {
        clean_end: sections.iter().all(|s| s.read.clean_end),
        ..Default::default()
    };
    for (i, s) in sections.iter().enumerate() {
        read.frames += s.read.frames;
        read.columnar_frames += s.read.columnar_frames;
        read.calls_after_cut += s.read.calls_after_cut;
        read.compressed_bytes += s.read.compressed_bytes;
        read.file_bytes += s.read.file_bytes;
        for is in &s.read.issues {
            read.issues.push(section::Issue {
                log: Some(paths[i].clone()),
                ..is.clone()
            });
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
        live_at_end: LiveAtEnd {
            blocks: tr.live_blocks,
            bytes: tr.live_bytes,
        },
        unknown_frees: unknown,
        inherited,
        address_reuse_conflicts: conflicts,
        sizes: m.sizes.report(t),
        slop: slop::report(t, &m.sizes, &tr.sizes, tr.peak_bytes),
        lifetimes: m.life.report(allocs, &never, t),
        threads_detail: m.threads.report(),
        memory: tr
            .mem
            .report(m.totals.last_ns, tr.live_bytes, tr.live_blocks),
        latency: m.lat.report(),
        watch: None,
        sites: None,
        folded: None,
    }
}
