//! `shimlog stats LOG... [--json] [--each] [--burst N] [--one-thread]`: what a captured workload did.
//!
//! The analysis (analysis/: one streaming pass over each log, memory proportional to the
//! blocks live at once, not to the events) gives the sections: totals, request sizes,
//! size-class waste per backend, lifetimes, threads (cross-thread frees, free bursts),
//! memory over time and latency inside the allocator. Several logs give one section per
//! process, then their total. This verb prints them: `--json` as one document, the
//! total's section at the top level (a single log's own section when there is one log),
//! with `logs` holding each process's section and `tree` the process tree (tree.rs) when
//! there are several; otherwise as the human report (text.rs: the tree first, the total,
//! then the largest processes' sections, or all with --each; with watch.rs, sites.rs and
//! units.rs).
mod classes;
mod sites;
mod text;
pub(crate) mod tree;
pub(crate) mod units;
mod watch;

use crate::analysis::whatif::{self, Config as ClassConfig, Spec as ClassSpec};
use crate::analysis::{self, Analysed, Section, SiteOptions};
use serde::Serialize;
use std::io::Write;

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
    /// Read and analyse on one thread. By default, when there is a second CPU, a log's frames
    /// are decompressed and decoded on a pool of threads (one per CPU) while the merge and
    /// the analysis run on this one; several logs read together are read and merged on a
    /// second thread.
    #[arg(long)]
    pub one_thread: bool,
    /// Where to find the program's binaries (or their debug files) for the call sites'
    /// symbols, by file name; by default the paths the log names.
    #[arg(long, value_name = "DIR")]
    pub binaries: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub alloc: crate::analysis::AllocFnArgs,
    /// With several logs, every process's section (by default the process tree, the total,
    /// and the sections of the few processes with the most events).
    #[arg(long)]
    pub each: bool,
    /// How many call sites each list shows.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub top: u64,
    /// Size-class what-if (repeatable): a backend's classes (`jemalloc`), a spacing rule
    /// (`every 256 B from 512 B to 4 KiB`, `4 per doubling from 128 B to 16 KiB`) or a list
    /// (`16,32,48,64`), optionally `on BACKEND`; the slop of each against the first.
    #[arg(long, value_name = "SPEC")]
    pub classes: Vec<String>,
    /// The call sites from a second pass over each log (as before they were taken in the
    /// analysis' one pass), for the tests that compare the two.
    #[arg(long, hide = true)]
    pub two_pass_sites: bool,
}

/// The JSON document for several logs.
#[derive(Serialize)]
struct Document<'a> {
    #[serde(flatten)]
    total: &'a Section,
    /// The processes as a tree (roots first, children beneath): tree.rs; absent for one log.
    #[serde(skip_serializing_if = "<[tree::TreeRow]>::is_empty")]
    tree: &'a [tree::TreeRow],
    #[serde(skip_serializing_if = "<[Section]>::is_empty")]
    logs: &'a [Section],
    /// `--classes`: one per configuration, in the order given.
    #[serde(skip_serializing_if = "<[ClassConfig]>::is_empty")]
    classes: &'a [ClassConfig],
}

pub fn run(a: Args) -> Result<i32, String> {
    let mut specs = Vec::new();
    for c in &a.classes {
        match ClassSpec::parse(c) {
            Ok(s) => specs.push(s),
            Err(e) => {
                eprintln!("shimlog stats: {e}");
                return Ok(2);
            }
        }
    }
    whatif::resolve(&mut specs);
    let wrappers = match analysis::AllocFns::parse(&a.alloc.alloc_fn) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("shimlog stats: {e}");
            return Ok(2);
        }
    };
    let so = SiteOptions {
        binaries: a.binaries.as_deref(),
        alloc_fn: &wrappers,
        top: a.top,
        two_pass: a.two_pass_sites,
    };
    let Analysed { sections, total, .. } = analysis::analyse(&a.logs, a.burst, !a.one_thread, &so)?;
    let configs = whatif::tabulate(&specs, &total.size_mix, total.peak_live_bytes);
    let tree = if sections.is_empty() { Vec::new() } else { tree::rows(&sections) };
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    let r = if a.json {
        let doc = serde_json::to_writer_pretty(
            &mut w,
            &Document { total: &total, tree: &tree, logs: &sections, classes: &configs },
        );
        doc.map_err(|e| e.to_string()).and_then(|_| writeln!(w).map_err(|e| e.to_string()))
    } else {
        text::write(&mut w, &sections, &total, &tree, a.each)
            .and_then(|_| classes::write(&mut w, &configs))
            .map_err(|e| e.to_string())
    };
    match r.and_then(|_| w.flush().map_err(|e| e.to_string())) {
        Ok(()) => Ok(0),
        // A closed pipe (shimlog stats | head) is not an error.
        Err(e) if e.contains("Broken pipe") => Ok(0),
        Err(e) => Err(format!("stats: writing the report: {e}")),
    }
}
