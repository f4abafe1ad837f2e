//! `shimlog report LOG... [--replay] -o report.html`: one self-contained HTML page of what
//! `stats` (and, with `--replay`, `replay`) found, to look at rather than read.
//!
//! The analysis runs here, in shimlog (analysis::analyse, the same pass as `stats`): the page
//! gets its results as one JSON document embedded in it (data.rs), and a small script of
//! its own (page.js) draws the charts as SVG and the tables from it. Nothing is loaded from
//! elsewhere: a Content-Security-Policy in the page forbids it, so a page that tried would
//! fail loudly in the browser's console. The page weighs what the results weigh (well under
//! 2 MB whatever the log's size), not what the log does.
mod data;
mod page;
mod replay;

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
}

pub fn run(a: Args) -> Result<i32, String> {
    // Refuse an unwritable destination before the (long) analysis, not after it.
    let mut f = std::fs::File::create(&a.output)
        .map_err(|e| format!("report: cannot create {}: {e}", a.output))?;
    let an = crate::analysis::analyse(&a.logs, a.burst, true, &crate::analysis::SiteOptions { binaries: None, top: 10, two_pass: false })?;
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
