//! `shimlog flamegraph LOG --by WHAT -o FILE.svg`: a flame graph (inferno) of the log's
//! stacks weighted by bytes allocated, calls, bytes live at the peak, bytes never freed, or
//! slow calls' time; `shimlog flamegraph BASE... --vs CANDIDATE... -o DIFF.svg`: the
//! differential one of two sides (diff.rs, the engine `compare --flamegraph` draws with).
pub mod diff;

use crate::analysis::{folded, has_stacks, profile, By};

#[derive(clap::Args)]
pub struct Args {
    /// The log (written with SHIM_STACKS); with --vs, the base's logs.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<String>,
    /// A differential flame graph: the candidate's logs against the base's (LOG...).
    #[arg(long = "vs", num_args = 1.., value_name = "CANDIDATE")]
    pub vs: Vec<String>,
    /// With --vs: scale the base to the candidate's total before colouring (auto: for bytes
    /// allocated, allocations and slow calls' time, when the logs' lengths differ by over 10% and 0.1 s).
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub normalize: diff::Normalize,
    /// What the widths measure.
    #[arg(long, value_enum, default_value = "alloc-bytes")]
    pub by: By,
    /// The SVG to write.
    #[arg(short, long)]
    pub output: std::path::PathBuf,
    /// Where to find the program's binaries for symbols (see `shimlog stats --binaries`).
    #[arg(long, value_name = "DIR")]
    pub binaries: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub alloc: crate::analysis::AllocFnArgs,
}

/// The flame graph of `lines` (folded, as [`folded`] makes them) as an SVG document.
pub fn svg(lines: &[String], title: &str, by: By) -> Result<String, String> {
    let mut o = inferno::flamegraph::Options::default();
    o.title = title.to_string();
    o.count_name = by.unit().to_string();
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), &mut out)
        .map_err(|e| e.to_string())?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// A log's profile (a pass of its own over the log), its length in seconds and its
/// notes said; Err: it has no stacks.
fn read(
    log: &str,
    r: &recorder::LogReader,
    binaries: Option<&std::path::Path>,
    wrappers: &crate::analysis::AllocFns,
) -> Result<(crate::analysis::Profile, Option<f64>), String> {
    if !has_stacks(r) {
        return Err(format!(
            "flamegraph: {log} has no stacks (written with SHIM_STACKS=off, or before format 4)"
        ));
    }
    let first = r.frames.iter().map(|f| f.h.first_ticks).min();
    let last = r.frames.iter().map(|f| f.h.last_ticks).max();
    let secs = match (first, last) {
        (Some(f), Some(l)) if l > f && r.header.ticks_per_sec > 0.0 => {
            Some((l - f) as f64 / r.header.ticks_per_sec)
        }
        _ => None,
    };
    let p = profile(r, binaries, wrappers);
    for i in &p.issues {
        eprintln!("shimlog: note: {i}");
    }
    Ok((p, secs))
}

fn side(s: &(Vec<Vec<String>>, Option<f64>)) -> diff::DiffSide<'_> {
    diff::DiffSide { logs: s.0.iter().map(|l| l.as_slice()).collect(), secs: s.1 }
}

/// `--vs`: each side's logs folded by `a.by`, drawn by [`diff::draw`]; refusals exit 2.
fn differential(a: &Args, w: &crate::analysis::AllocFns) -> Result<Result<String, String>, String> {
    let mut sides = Vec::new();
    let mut estimated = false;
    for logs in [&a.logs, &a.vs] {
        let mut lines = Vec::new();
        let mut secs = Some(0.0);
        for l in logs {
            let r = crate::open::open(l)?;
            let (p, s) = match read(l, &r, a.binaries.as_deref(), w) {
                Ok(x) => x,
                Err(e) => return Ok(Err(e)),
            };
            estimated |= p.mode == "sample";
            lines.push(folded(&p, a.by));
            secs = secs.zip(s).map(|(t, s)| t + s);
        }
        let n = logs.len() as f64;
        sides.push((lines, secs.map(|t| t / n)));
    }
    Ok(diff::draw(&side(&sides[0]), &side(&sides[1]), a.by, a.normalize, estimated)
        .map_err(|e| format!("flamegraph --vs: {e}")))
}

pub fn run(a: Args) -> Result<i32, String> {
    let w = match crate::analysis::AllocFns::parse(&a.alloc.alloc_fn) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("shimlog flamegraph: {e}");
            return Ok(2);
        }
    };
    if !a.vs.is_empty() {
        let svg = match differential(&a, &w)? {
            Ok(s) => s,
            Err(m) => {
                eprintln!("shimlog {m}");
                return Ok(2);
            }
        };
        std::fs::write(&a.output, svg)
            .map_err(|e| format!("flamegraph: writing {}: {e}", a.output.display()))?;
        return Ok(0);
    }
    let [log] = a.logs.as_slice() else {
        eprintln!("shimlog flamegraph: one log, or BASE... --vs CANDIDATE... for a differential flame graph");
        return Ok(2);
    };
    let (p, _) = read(log, &crate::open::open(log)?, a.binaries.as_deref(), &w)?;
    let lines = folded(&p, a.by);
    if lines.is_empty() {
        return Err(format!(
            "flamegraph: no stack in {} has anything {:?} to show (SHIM_STACKS={})",
            log, a.by, p.mode
        ));
    }
    let svg = svg(&lines, &format!("{} by {}", log, a.by.title()), a.by)
        .map_err(|e| format!("flamegraph: drawing: {e}"))?;
    std::fs::write(&a.output, svg).map_err(|e| format!("flamegraph: writing {}: {e}", a.output.display()))?;
    Ok(0)
}
