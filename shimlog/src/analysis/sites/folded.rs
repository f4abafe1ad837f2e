//! A profile's stacks folded for flame graphs ("outer;...;inner value" lines, as inferno
//! takes them), weighted by bytes allocated, calls, bytes live at the peak, bytes never freed
//! or slow calls' time ([`By`]); a section keeps those a report draws ([`Folded`]).
use super::profile::Profile;

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
    pub fn unit(self) -> &'static str {
        match self {
            By::AllocCalls => "calls",
            By::Slow => "ns",
            _ => "bytes",
        }
    }
}
