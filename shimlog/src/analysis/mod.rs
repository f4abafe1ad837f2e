//! The analysis engine every verb that reads a log for what it did builds on (`stats`,
//! `report`, `export`, `pprof`, `flamegraph`): one streaming pass over the logs in time order
//! (drive.rs) feeds every event to its process's [`Analysis`] (process.rs), which keeps the
//! live blocks (heap.rs over the table of blocks.rs, sizes interned in classes.rs) and each
//! section's state: request sizes (sizes.rs), lifetimes, latency, memory over time,
//! threads, totals, the watch log (watch.rs); several logs read together are followed as
//! one total (tracker.rs), fork children with the blocks they inherited (inherit.rs). At the
//! end each process's state, and the total's, become a [`Section`] (section.rs, with the
//! size-class waste of slop.rs and the call sites of sites/, whose collector is one more
//! consumer of the same pass for a log with stacks), the document `stats` prints and `report` draws. `pprof` and `flamegraph` draw
//! on the call-site profile alone.
//!
//! What the verbs use is re-exported here; the modules themselves are private to the engine.
mod blocks;
mod classes;
mod drive;
mod fasthist;
mod heap;
mod inherit;
mod latency;
mod lifetimes;
mod memory;
mod process;
mod section;
pub(crate) mod sites;
mod sizes;
mod slices;
mod slop;
mod threads;
mod totals;
mod tracker;
mod watch;
pub(crate) mod whatif;

pub(crate) use blocks::{Block, BlockTable};
pub(crate) use classes::SizeTable;
pub(crate) use drive::{pipelined, thread_cpu_ns, Progress};
pub(crate) use latency::Latency;
pub(crate) use process::Analysis;
pub(crate) use section::{Section, SiteOptions};
pub(crate) use sites::{
    folded, has_stacks, profile, AllocFnArgs, AllocFns, By, Profile, SiteRow, SitesReport,
};
pub(crate) use slices::{bucket_value, halve, Slice, Slices, BUCKETS, OPS};
pub(crate) use slop::ratio;
pub(crate) use threads::Threads;
pub(crate) use watch::WatchReport;

use recorder::LogReader;
use tracker::Tracker;

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

/// Reads `logs` (one process each; several are read together in one time order, a parent
/// with its children) and analyses them: `burst`, the shortest run of frees counted as a
/// burst; `two`, read on a second thread when there is a second CPU; `so`, the call sites.
pub(crate) fn analyse(logs: &[String], burst: u64, two: bool, so: &SiteOptions) -> Result<Analysed, String> {
    analyse_with(logs, burst, two, so, false)
}

/// [`analyse`], and with `sliced` each log's run cut into time slices too (in the same
/// pass: each analysis' `slices`, for `shimlog compare`).
pub(crate) fn analyse_with(
    logs: &[String],
    burst: u64,
    two: bool,
    so: &SiteOptions,
    sliced: bool,
) -> Result<Analysed, String> {
    let readers: Vec<LogReader> = logs.iter().map(|p| crate::open::open(p)).collect::<Result<_, _>>()?;
    let mut table = SizeTable::default();
    let progress = Progress::new(readers.iter().map(|r| r.compressed_bytes()).sum());
    let mut an: Vec<Analysis> = readers
        .iter()
        .map(|r| {
            let mut a = Analysis::new(r.header.pid, burst);
            if sliced {
                a.slices = Some(Box::new(Slices::new(r.header.window == Some(0))));
            }
            if sites::has_stacks(r) && !so.two_pass {
                a.stacks = Some(Box::new(sites::Collector::new(&r.header, sites::light(&r.header))));
            }
            a
        })
        .collect();
    let mut sections = Vec::new();
    let mut offsets = vec![0];
    let total = if readers.len() == 1 {
        let read = drive::one(&readers[0], &mut an[0], &mut table, &progress, two);
        progress.done();
        section::of_process(&logs[0], &readers[0], &mut an[0], read, &mut table, so)
    } else {
        let base = readers.iter().map(|r| r.header.start_mono_ns).min().unwrap_or(0);
        offsets = readers.iter().map(|r| r.header.start_mono_ns - base).collect();
        let mut tracker = Tracker::new(readers.len());
        let reads = drive::many(&readers, &offsets, &mut an, &mut table, &mut tracker, &progress, two);
        progress.done();
        for (i, read) in reads.into_iter().enumerate() {
            sections.push(section::of_process(&logs[i], &readers[i], &mut an[i], read, &mut table, so));
        }
        section::of_total(logs, &readers, &an, &offsets, &sections, &tracker, &mut table, burst)
    };
    Ok(Analysed { sections, total, analyses: an, offsets })
}
