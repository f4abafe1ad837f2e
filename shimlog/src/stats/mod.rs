//! `shimlog stats LOG... [--json] [--burst N] [--one-thread]`: what a captured workload did.
//!
//! The analysis (analysis/: one streaming pass over each log, memory proportional to the
//! blocks live at once, not to the events) gives the sections: totals, request sizes,
//! size-class waste per backend, lifetimes, threads (cross-thread frees, free bursts),
//! memory over time and latency inside the allocator. Several logs give one section per
//! process, then their total. This verb prints them: `--json` as one document, the
//! total's section at the top level (a single log's own section when there is one log),
//! with `logs` holding each process's section when there are several; otherwise as the
//! human report (text.rs, with watch.rs, sites.rs and units.rs).
mod sites;
mod text;
pub(crate) mod units;
mod watch;

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
    /// How many call sites each list shows.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub top: u64,
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
    logs: &'a [Section],
}

pub fn run(a: Args) -> Result<i32, String> {
    let so = SiteOptions { binaries: a.binaries.as_deref(), top: a.top, two_pass: a.two_pass_sites };
    let Analysed { sections, total, .. } = analysis::analyse(&a.logs, a.burst, !a.one_thread, &so)?;
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
        text::write(&mut w, &sections, &total).map_err(|e| e.to_string())
    };
    match r.and_then(|_| w.flush().map_err(|e| e.to_string())) {
        Ok(()) => Ok(0),
        // A closed pipe (shimlog stats | head) is not an error.
        Err(e) if e.contains("Broken pipe") => Ok(0),
        Err(e) => Err(format!("stats: writing the report: {e}")),
    }
}
