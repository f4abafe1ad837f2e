//! `shimlog compare BASE... --vs CANDIDATE... [--json] [--fail-if EXPR] [--force]`: two
//! captures side by side (canary A on jemalloc against canary B on mimalloc; before and
//! after a change), each metric with its difference and a bootstrap interval, and one
//! verdict per group of metrics. Each side is one log or a group of them (one run's
//! processes, a canary's windows, several hosts), read in one pass by the analysis engine
//! (side.rs), one side after the other. metrics.rs names the metrics and computes them,
//! boot.rs the intervals, gate.rs `--fail-if`, document.rs the document they make, text.rs
//! the table; docs/compare.md.
mod boot;
#[cfg(test)]
mod coverage;
mod document;
pub(crate) mod flame;
mod gate;
mod metrics;
pub(crate) mod side;
mod text;

use crate::analysis::{By, SiteOptions};
use crate::flamegraph::diff::Normalize;
pub use document::{Document, Method, SideInfo, SiteMove, SitesDiff, Verdict};
use metrics::{Group, Role};
pub(crate) use side::Side;
use side::{Kind, SiteNums};
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    /// The base: one log, or several (one run's processes, a canary's windows, hosts).
    #[arg(required = true)]
    pub base: Vec<String>,
    /// The candidate's logs, compared against the base.
    #[arg(long = "vs", required = true, num_args = 1.., value_name = "CANDIDATE")]
    pub vs: Vec<String>,
    /// One JSON document instead of the table (docs/compare.md).
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when a term fails: `live_peak>+10%` (relative to the base), `alloc_p99>+5ms`,
    /// `rss_peak>+64MiB` (absolute change), `rss_peak>2GiB` (the candidate's value);
    /// comma-separated, any failing fails.
    #[arg(long, value_name = "EXPR")]
    pub fail_if: Vec<String>,
    /// Compare logs of different programs.
    #[arg(long)]
    pub force: bool,
    /// Confidence of the intervals, in percent.
    #[arg(long, default_value_t = 95.0)]
    pub confidence: f64,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=100_000))]
    pub resamples: u64,
    /// The bootstrap's seed (the same logs and seed give the same output).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The smallest relative change reported as a difference, in percent, for every group
    /// (default: 25 for latency, 10 for calls and stalls, 5 for memory and the allocator's
    /// statistics).
    #[arg(long, value_name = "PCT")]
    pub min_change: Option<f64>,
    /// Call sites listed per measure (logs with stacks).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Where to find the program's binaries for the call sites' symbols.
    #[arg(long, value_name = "DIR")]
    pub binaries: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub alloc: crate::analysis::AllocFnArgs,
    /// Read and analyse on one thread.
    #[arg(long)]
    pub one_thread: bool,
    /// Also write a differential flame graph of the two sides' call sites (both with
    /// stacks): the candidate's widths, red where a stack grew from the base, blue where it
    /// shrank.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<std::path::PathBuf>,
    /// What the flame graph measures (as `shimlog flamegraph --by`).
    #[arg(long, value_name = "WHAT", default_value = "alloc-bytes", value_parser = flame::by_parser())]
    pub flame_by: By,
    /// Scale the base to the candidate's total before colouring (auto: for bytes allocated and
    /// slow calls' time, when the sides' logs differ in length by over 10% and 0.1 s).
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub flame_normalize: Normalize,
}

/// Call sites ranked per measure from each side's top lists.
const SITES_READ: u64 = 100;

/// A refusal: one line on stderr, exit status 2.
fn refuse(msg: &str) -> Result<i32, String> {
    eprintln!("shimlog compare: {msg}");
    Ok(2)
}

/// What `compare` made of its arguments: a refusal (one line), or the document with the
/// two sides it was computed from (`report --vs` draws them).
#[allow(clippy::large_enum_variant)] // made once per command, returned once: no boxing needed
pub enum Evaluated {
    Refused(String),
    Done { doc: Document, base: Side, cand: Side },
}

pub fn run(a: Args) -> Result<i32, String> {
    let Some(p) = &a.flamegraph else { return compared(&a, None) };
    let r = compared(&a, Some(flame::create(p)?));
    if !matches!(r, Ok(0 | 1)) {
        let _ = std::fs::remove_file(p); // refused or failed: no file left behind
    }
    r
}

/// `run` with the flame graph's file, if asked for, created.
fn compared(a: &Args, flame_file: Option<std::fs::File>) -> Result<i32, String> {
    let doc = match evaluate(a)? {
        Evaluated::Refused(m) => return refuse(&m),
        Evaluated::Done { doc, base, cand } => {
            if let Some(mut f) = flame_file {
                match flame::svg(&base, &cand, a.flame_by, a.flame_normalize) {
                    Ok(svg) => f
                        .write_all(svg.as_bytes())
                        .map_err(|e| format!("compare: writing the flame graph: {e}"))?,
                    Err(m) => return refuse(&m),
                }
            }
            doc
        }
    };
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    let r = if a.json {
        serde_json::to_writer_pretty(&mut w, &doc)
            .map_err(|e| e.to_string())
            .and_then(|_| writeln!(w).map_err(|e| e.to_string()))
    } else {
        text::write(&mut w, &doc).map_err(|e| e.to_string())
    };
    match r.and_then(|_| w.flush().map_err(|e| e.to_string())) {
        Ok(()) => {}
        Err(e) if e.contains("Broken pipe") => {}
        Err(e) => return Err(format!("compare: writing the report: {e}")),
    }
    let failed: Vec<&gate::Outcome> = doc.fail_if.iter().filter(|o| o.failed).collect();
    for o in &failed {
        eprintln!("shimlog compare: failed: {} ({})", o.term, o.observed);
    }
    Ok(if failed.is_empty() { 0 } else { 1 })
}

/// Reads both sides and compares them (no output); with `--flamegraph`, each log's stacks
/// folded by `--flame-by` are kept for [`flame::svg`].
pub fn evaluate(a: &Args) -> Result<Evaluated, String> {
    evaluate_folding(a, a.flamegraph.as_ref().map(|_| a.flame_by))
}

/// [`evaluate`], keeping each log's stacks folded by `flame` (None: none kept) from the same
/// one pass (`report --vs` draws its differential flame graph from them).
pub fn evaluate_folding(a: &Args, flame: Option<By>) -> Result<Evaluated, String> {
    let refused = |m: String| Ok(Evaluated::Refused(m));
    let terms = match gate::parse(&a.fail_if) {
        Ok(t) => t,
        Err(e) => return refused(e),
    };
    if !(50.0..100.0).contains(&a.confidence) {
        return refused("--confidence: a percentage from 50 to 99.9".into());
    }
    let wrappers = match crate::analysis::AllocFns::parse(&a.alloc.alloc_fn) {
        Ok(w) => w,
        Err(e) => return refused(e),
    };
    let so = SiteOptions {
        binaries: a.binaries.as_deref(),
        alloc_fn: &wrappers,
        top: SITES_READ,
        two_pass: false,
    };
    let base = side::read(&a.base, !a.one_thread, &so, flame)?;
    let cand = side::read(&a.vs, !a.one_thread, &so, flame)?;
    if !a.force && base.exes() != cand.exes() {
        return refused(format!(
            "different programs: the base runs {}, the candidate {} (--force compares them anyway)",
            base.names().join(", "),
            cand.names().join(", ")
        ));
    }
    let defs = metrics::defs(&base, &cand);
    let refusals: Vec<Option<String>> = defs.iter().map(|d| refusal(d.role, &base, &cand)).collect();
    let p = boot::Params {
        resamples: a.resamples as usize,
        seed: a.seed,
        confidence: a.confidence / 100.0,
        min_change: a.min_change.map(|m| m / 100.0),
    };
    let rows = boot::rows(&defs, &refusals, &base, &cand, &p);
    if rows.iter().all(|r| r.not_compared.is_some()) {
        return refused("nothing to compare: the two sides have no metric in common".into());
    }
    let outcomes = match gate::judge(&terms, &rows) {
        Ok(o) => o,
        Err(e) => return refused(e),
    };
    let mut verdicts: Vec<Verdict> = Group::ALL.iter().map(|&g| text::verdict(g, &rows)).collect();
    if !rows.iter().any(|r| r.group == Group::AllocatorStats) {
        let v = verdicts.iter_mut().find(|v| v.group == Group::AllocatorStats).expect("group");
        v.text = format!("{}: not compared ({})", Group::AllocatorStats.title(), no_stats(&base, &cand));
    }
    let doc = Document {
        base: info(&a.base, &base),
        candidate: info(&a.vs, &cand),
        method: Method {
            resampling: if a.base.len() > 1 || a.vs.len() > 1 {
                "logs, each whole; a side of one log, its time slices"
            } else {
                "time slices"
            },
            resamples: p.resamples,
            seed: p.seed,
            confidence: p.confidence,
        },
        metrics: rows,
        verdicts,
        sites: sites_diff(&base, &cand, a.top),
        fail_if: outcomes,
    };
    Ok(Evaluated::Done { doc, base, cand })
}

/// Why a metric computed from `role`'s logs cannot be compared between these sides.
fn refusal(role: Role, base: &Side, cand: &Side) -> Option<String> {
    if role != Role::Calls {
        return None;
    }
    let lacks = |s: &Side, name: &str| -> Option<String> {
        if !s.call_logs().is_empty() {
            return None;
        }
        let why = if s.kinds().contains(&Kind::Sampled) {
            "sampled-only logs (SHIM_RECORD=sample)"
        } else {
            "only watch logs"
        };
        Some(format!("the {name} has {why}; this metric needs every call recorded on both sides"))
    };
    lacks(base, "base").or_else(|| lacks(cand, "candidate"))
}

/// Why no allocator statistic is compared.
fn no_stats(base: &Side, cand: &Side) -> String {
    let (b, c) = (metrics::stat_names(base), metrics::stat_names(cand));
    match (b.is_empty(), c.is_empty()) {
        (true, true) => {
            "neither side has a watch log with the allocator's statistics (SHIM_WINDOW, SHIM_EVERY...)".into()
        }
        (true, false) => "the base has no watch log with the allocator's statistics".into(),
        (false, true) => "the candidate has no watch log with the allocator's statistics".into(),
        (false, false) => format!(
            "the two allocators report different statistics: the base {}, the candidate {}",
            b.join(", "),
            c.join(", ")
        ),
    }
}

fn info(paths: &[String], s: &Side) -> SideInfo {
    SideInfo {
        logs: paths.to_vec(),
        programs: s.names(),
        backends: s.backends(),
        kinds: s.kinds(),
        slices: s.logs.iter().map(|l| l.slices.len()).sum(),
    }
}

/// The sites whose bytes, live bytes at the peak and time inside the allocator moved most
/// (sites of both sides' top lists; one absent from a side counts 0 there).
fn sites_diff(base: &Side, cand: &Side, top: usize) -> Option<SitesDiff> {
    let (b, c) = (base.sites.as_ref()?, cand.sites.as_ref()?);
    let moved = |f: fn(&SiteNums) -> f64| {
        let mut v: Vec<SiteMove> = b
            .keys()
            .chain(c.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|k| {
                let x = b.get(k).map_or(0.0, f);
                let y = c.get(k).map_or(0.0, f);
                SiteMove { site: k.clone(), base: x, candidate: y, change: y - x }
            })
            .filter(|m| m.change != 0.0)
            .collect();
        v.sort_by(|p, q| q.change.abs().total_cmp(&p.change.abs()));
        v.truncate(top);
        v
    };
    Some(SitesDiff {
        estimated: base.sites_estimated || cand.sites_estimated,
        alloc_bytes: moved(|s| s.alloc_bytes),
        live_at_peak_bytes: moved(|s| s.live_at_peak_bytes),
        timed_ns: moved(|s| s.timed_ns),
    })
}
