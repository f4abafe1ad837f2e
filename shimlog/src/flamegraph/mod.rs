//! `shimlog flamegraph LOG --by WHAT -o FILE.svg`: a flame graph (inferno) of the log's
//! stacks weighted by bytes allocated, calls, bytes live at the peak, bytes never freed, or
//! slow calls' time.
use crate::sites::{self, Profile};

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

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum By {
    AllocBytes,
    AllocCalls,
    LiveAtPeak,
    Leaked,
    Slow,
}

/// The stacks as folded lines ("outer;...;inner value"), heaviest first.
pub fn folded(p: &Profile, by: By) -> Vec<String> {
    let mut v: Vec<(u64, String)> = Vec::new();
    for (id, t) in &p.c.sites {
        let w = match by {
            By::AllocBytes => t.alloc_bytes,
            By::AllocCalls => t.alloc_calls,
            By::LiveAtPeak => t.peak_bytes,
            By::Leaked => t.live_bytes,
            By::Slow => t.slow_ns as f64,
        }
        .round() as u64;
        if w == 0 {
            continue;
        }
        let frames = p.frames.get(id).map(|f| f.as_slice()).unwrap_or(&[]);
        let mut names: Vec<String> = frames.iter().rev().map(|f| f.function.replace(';', ":")).collect();
        if names.is_empty() {
            names.push(format!("[stack {id}]"));
        }
        v.push((w, names.join(";")));
    }
    v.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    v.into_iter().map(|(w, s)| format!("{s} {w}")).collect()
}

/// A log's stacks folded by each measure a report draws, with nothing to draw left empty.
#[derive(Clone, Debug, Default)]
pub struct Folded {
    pub graphs: Vec<(By, Vec<String>)>,
}

impl Folded {
    pub fn of(p: &Profile) -> Folded {
        let graphs = [By::AllocBytes, By::LiveAtPeak, By::Leaked, By::Slow]
            .into_iter()
            .map(|b| (b, folded(p, b)))
            .filter(|(_, l)| !l.is_empty())
            .collect();
        Folded { graphs }
    }
}

impl By {
    /// What the widths measure, in words.
    pub fn title(self) -> &'static str {
        match self {
            By::AllocBytes => "bytes allocated",
            By::AllocCalls => "allocations",
            By::LiveAtPeak => "bytes live at the peak",
            By::Leaked => "bytes never freed",
            By::Slow => "time in slow calls",
        }
    }
    fn unit(self) -> &'static str {
        match self {
            By::AllocCalls => "calls",
            By::Slow => "ns",
            _ => "bytes",
        }
    }
}

/// The flame graph of `lines` (folded, as [`folded`] makes them) as an SVG document.
pub fn svg(lines: &[String], title: &str, by: By) -> Result<String, String> {
    let mut o = inferno::flamegraph::Options::default();
    o.title = title.to_string();
    o.count_name = by.unit().to_string();
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), &mut out).map_err(|e| e.to_string())?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

pub fn run(a: Args) -> Result<i32, String> {
    let r = crate::open::open(&a.log)?;
    if !sites::has_stacks(&r) {
        return Err(format!("flamegraph: {} has no stacks (written with SHIM_STACKS=off, or before format 4)", a.log));
    }
    let p = sites::profile(&r, a.binaries.as_deref());
    for i in &p.issues {
        eprintln!("shimlog: note: {i}");
    }
    let lines = folded(&p, a.by);
    if lines.is_empty() {
        return Err(format!("flamegraph: no stack in {} has anything {:?} to show (SHIM_STACKS={})", a.log, a.by, p.mode));
    }
    let svg = svg(&lines, &format!("{} by {}", a.log, a.by.title()), a.by).map_err(|e| format!("flamegraph: drawing: {e}"))?;
    std::fs::write(&a.output, svg).map_err(|e| format!("flamegraph: writing {}: {e}", a.output.display()))?;
    Ok(0)
}
