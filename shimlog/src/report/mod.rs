//! `shimlog report LOG... [--replay] -o report.html`: one self-contained HTML page of what
//! `stats` (and, with `--replay`, `replay`) found, to look at rather than read.
//!
//! The analysis runs here, in shimlog (analysis::analyse, the same pass as `stats`): the page
//! gets its results as one JSON document embedded in it (data.rs), and a small script of
//! its own (page.js) draws the charts as SVG and the tables from it. Nothing is loaded from
//! elsewhere: a Content-Security-Policy in the page forbids it, so a page that tried would
//! fail loudly in the browser's console. The page weighs what the results weigh (well under
//! 2 MB whatever the log's size), not what the log does.
//!
//! With `--vs CANDIDATE...` the page is `compare`'s instead (vs.rs): the two sides overlaid
//! (memory over time, latency CDFs), compare's table and its verdicts, and when both sides
//! have stacks the differential flame graph `compare --flamegraph` writes.
mod data;
mod page;
mod replay;
mod vs;

use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    /// Logs to show (a parent and its children: one process each, and their total).
    #[arg(required = true)]
    pub logs: Vec<String>,
    /// Where to write the page.
    #[arg(short, long, value_name = "FILE")]
    pub output: String,
    /// Also replay each log against every backend (as `shimlog replay`) and show them side by side.
    #[arg(long)]
    pub replay: bool,
    /// A free burst is a run of at least this many frees on one thread (as `stats --burst`).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub burst: u64,
    /// Compare the logs above (the base) with these (the candidate), as `shimlog compare`
    /// does, and draw the pair overlaid: memory over time, latency CDFs, the table, verdicts,
    /// and the differential flame graph of bytes allocated when both sides have stacks.
    #[arg(long = "vs", num_args = 1.., value_name = "CANDIDATE")]
    pub vs: Vec<String>,
    /// With --vs: compare logs of different programs.
    #[arg(long, requires = "vs")]
    pub force: bool,
    #[command(flatten)]
    pub alloc: crate::analysis::AllocFnArgs,
}

pub fn run(a: Args) -> Result<i32, String> {
    // Refuse an unwritable destination before the (long) analysis, not after it.
    let mut f =
        std::fs::File::create(&a.output).map_err(|e| format!("report: cannot create {}: {e}", a.output))?;
    if !a.vs.is_empty() {
        if a.replay {
            let _ = std::fs::remove_file(&a.output);
            eprintln!("shimlog report: --replay and --vs: one at a time (a comparison page, or one capture's page with its replay)");
            return Ok(2);
        }
        let ca = crate::compare::Args {
            base: a.logs.clone(),
            vs: a.vs.clone(),
            json: false,
            fail_if: Vec::new(),
            force: a.force,
            confidence: 95.0,
            resamples: 1000,
            seed: 1,
            min_change: None,
            top: 10,
            binaries: None,
            alloc: a.alloc.clone(),
            one_thread: false,
            flamegraph: None,
            flame_by: crate::analysis::By::AllocBytes,
            flame_normalize: crate::flamegraph::diff::Normalize::Auto,
        };
        // The same one pass keeps each log's stacks folded by bytes allocated, for the
        // differential flame graph (compare --flamegraph's engine).
        let (doc, base, cand) = match crate::compare::evaluate_folding(&ca, Some(ca.flame_by)) {
            Ok(crate::compare::Evaluated::Done { doc, base, cand }) => (doc, base, cand),
            Ok(crate::compare::Evaluated::Refused(m)) => {
                let _ = std::fs::remove_file(&a.output);
                eprintln!("shimlog report: {m}");
                return Ok(2);
            }
            Err(e) => {
                let _ = std::fs::remove_file(&a.output);
                return Err(e);
            }
        };
        let flame = crate::compare::flame::svg_plain(&base, &cand, ca.flame_by, ca.flame_normalize);
        let html = page::render(&vs::build(&doc, &base, &cand, flame)?)?;
        f.write_all(html.as_bytes())
            .and_then(|_| f.flush())
            .map_err(|e| format!("report: writing {}: {e}", a.output))?;
        println!("{}", a.output);
        return Ok(0);
    }
    let wrappers = match crate::analysis::AllocFns::parse(&a.alloc.alloc_fn) {
        Ok(w) => w,
        Err(e) => {
            let _ = std::fs::remove_file(&a.output);
            eprintln!("shimlog report: {e}");
            return Ok(2);
        }
    };
    let an = crate::analysis::analyse(
        &a.logs,
        a.burst,
        true,
        &crate::analysis::SiteOptions { binaries: None, alloc_fn: &wrappers, top: 10, two_pass: false },
    )?;
    let replays = if a.replay {
        a.logs.iter().map(|l| replay::run(l)).collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let doc = data::build(&a.logs, &an, a.replay, replays);
    let html = page::render(&doc)?;
    f.write_all(html.as_bytes())
        .and_then(|_| f.flush())
        .map_err(|e| format!("report: writing {}: {e}", a.output))?;
    println!("{}", a.output);
    Ok(0)
}
