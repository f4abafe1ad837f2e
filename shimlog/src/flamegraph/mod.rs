//! `shimlog flamegraph LOG --by WHAT -o FILE.svg`: a flame graph (inferno) of the log's
//! stacks weighted by bytes allocated, calls, bytes live at the peak, bytes never freed, or
//! slow calls' time.
pub mod diff;

use crate::analysis::{folded, has_stacks, profile, By};

#[derive(clap::Args)]
pub struct Args {
    /// The log (written with SHIM_STACKS).
    pub log: String,
    /// What the widths measure.
    #[arg(long, value_enum, default_value = "alloc-bytes")]
    pub by: By,
    /// The SVG to write.
    #[arg(short, long)]
    pub output: std::path::PathBuf,
    /// Where to find the program's binaries for symbols (see `shimlog stats --binaries`).
    #[arg(long, value_name = "DIR")]
    pub binaries: Option<std::path::PathBuf>,
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

pub fn run(a: Args) -> Result<i32, String> {
    let r = crate::open::open(&a.log)?;
    if !has_stacks(&r) {
        return Err(format!(
            "flamegraph: {} has no stacks (written with SHIM_STACKS=off, or before format 4)",
            a.log
        ));
    }
    let p = profile(&r, a.binaries.as_deref());
    for i in &p.issues {
        eprintln!("shimlog: note: {i}");
    }
    let lines = folded(&p, a.by);
    if lines.is_empty() {
        return Err(format!(
            "flamegraph: no stack in {} has anything {:?} to show (SHIM_STACKS={})",
            a.log, a.by, p.mode
        ));
    }
    let svg = svg(&lines, &format!("{} by {}", a.log, a.by.title()), a.by)
        .map_err(|e| format!("flamegraph: drawing: {e}"))?;
    std::fs::write(&a.output, svg).map_err(|e| format!("flamegraph: writing {}: {e}", a.output.display()))?;
    Ok(0)
}
