//! Ranking the call sites for a section (`shimlog stats`, `shimlog report`; stats/sites.rs
//! prints them): by bytes allocated, by calls, by bytes live at the heap's peak, by bytes
//! never freed, by time inside the allocator, and the slow calls (by their time). A site is
//! a function (the first frame past the allocation wrappers); its totals add up every stack
//! that ends there. In sample mode they are estimates: each sampled allocation of s bytes
//! stands for 1 / (1 - exp(-s / mean)) of its kind.
use super::profile::{site_frame, Profile};
use super::symbols::Frame;
use rustc_hash::FxHashMap;
use serde::Serialize;

#[derive(Serialize, Clone, Debug, Default)]
pub struct SiteRow {
    pub function: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub object: String,
    pub alloc_bytes: u64,
    pub alloc_calls: u64,
    pub live_at_peak_bytes: u64,
    pub live_at_peak_objects: u64,
    pub leaked_bytes: u64,
    pub leaked_objects: u64,
    /// Allocations of this site in the log (samples, in sample mode).
    pub samples: u64,
    pub timed_calls: u64,
    pub timed_ns: u64,
    pub slow_calls: u64,
    pub slow_ns: u64,
    /// The heaviest stack ending here, innermost first: "function (file:line)".
    pub stack: Vec<String>,
}

#[derive(Serialize, Clone, Debug, Default)]
pub struct SitesReport {
    /// SHIM_STACKS of the run: slow, sample or all.
    pub mode: String,
    /// How stacks were unwound: tables or fp.
    pub unwind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_bytes: Option<u64>,
    /// True in sample mode: per-site totals are estimates from the samples.
    pub estimated: bool,
    pub stacks: u64,
    /// Stacks folded past the program's allocation wrappers (`--alloc-fn`) into their caller.
    pub past_wrappers: u64,
    /// The heap's peak (every block), which `live_at_peak` refers to, and when.
    pub peak_bytes: u64,
    pub peak_at_ns: u64,
    /// Sums over every site (estimates in sample mode).
    pub total_alloc_bytes: u64,
    pub total_alloc_calls: u64,
    pub total_live_at_peak_bytes: u64,
    pub total_leaked_bytes: u64,
    pub by_bytes: Vec<SiteRow>,
    pub by_calls: Vec<SiteRow>,
    pub live_at_peak: Vec<SiteRow>,
    pub leaked: Vec<SiteRow>,
    pub by_time: Vec<SiteRow>,
    pub slow: Vec<SiteRow>,
    /// Problems with the stacks or the binaries, one line each.
    pub issues: Vec<String>,
}

fn frame_text(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(l)) => format!("{} ({}:{l})", f.function, short(file)),
        _ => format!("{} ({})", f.function, f.object),
    }
}

fn short(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

impl SitesReport {
    pub fn of(p: &Profile, top: usize) -> SitesReport {
        let mut rows: FxHashMap<(String, String), (SiteRow, f64, [f64; 6])> = FxHashMap::default();
        for (&id, t) in &p.c.sites {
            let (function, object, location) = match site_frame(p, id) {
                Some(f) => (
                    f.function.clone(),
                    f.object.clone(),
                    f.file.as_ref().map(|file| match f.line {
                        Some(l) => format!("{}:{l}", short(file)),
                        None => short(file).to_string(),
                    }),
                ),
                None if id == 0 => ("[stack table full]".into(), "?".into(), None),
                None => (format!("[stack {id}: not in the log]"), "?".into(), None),
            };
            let e = rows.entry((function.clone(), object.clone())).or_insert_with(|| {
                (SiteRow { function, object, location, ..Default::default() }, -1.0, [0.0; 6])
            });
            let r = &mut e.0;
            e.2[0] += t.alloc_bytes;
            e.2[1] += t.alloc_calls;
            e.2[2] += t.peak_bytes;
            e.2[3] += t.peak_objects;
            e.2[4] += t.live_bytes;
            e.2[5] += t.live_objects;
            r.samples += t.samples;
            r.timed_calls += t.timed_calls;
            r.timed_ns += t.timed_ns;
            r.slow_calls += t.slow_calls;
            r.slow_ns += t.slow_ns;
            let weight = t.alloc_bytes + t.slow_ns as f64;
            if weight > e.1 {
                e.1 = weight;
                r.stack = p.frames.get(&id).map(|f| f.iter().map(frame_text).collect()).unwrap_or_default();
            }
        }
        let all: Vec<SiteRow> = rows
            .into_values()
            .map(|(mut r, _, v)| {
                r.alloc_bytes = v[0].round() as u64;
                r.alloc_calls = v[1].round() as u64;
                r.live_at_peak_bytes = v[2].round() as u64;
                r.live_at_peak_objects = v[3].round() as u64;
                r.leaked_bytes = v[4].round() as u64;
                r.leaked_objects = v[5].round() as u64;
                r
            })
            .collect();
        let ranked = |key: &dyn Fn(&SiteRow) -> u64| {
            let mut v: Vec<SiteRow> = all.iter().filter(|r| key(r) > 0).cloned().collect();
            v.sort_by(|a, b| key(b).cmp(&key(a)).then_with(|| a.function.cmp(&b.function)));
            v.truncate(top);
            v
        };
        SitesReport {
            mode: p.mode.clone(),
            unwind: p.unwind.clone(),
            sample_bytes: p.c.mean,
            estimated: p.c.mean.is_some(),
            stacks: p.c.stacks.len() as u64,
            past_wrappers: p.cuts.len() as u64,
            peak_bytes: p.c.peak_bytes,
            peak_at_ns: p.c.peak_ns,
            total_alloc_bytes: all.iter().map(|r| r.alloc_bytes).sum(),
            total_alloc_calls: all.iter().map(|r| r.alloc_calls).sum(),
            total_live_at_peak_bytes: all.iter().map(|r| r.live_at_peak_bytes).sum(),
            total_leaked_bytes: all.iter().map(|r| r.leaked_bytes).sum(),
            by_bytes: ranked(&|r| r.alloc_bytes),
            by_calls: ranked(&|r| r.alloc_calls),
            live_at_peak: ranked(&|r| r.live_at_peak_bytes),
            leaked: ranked(&|r| r.leaked_bytes),
            by_time: ranked(&|r| r.timed_ns),
            slow: ranked(&|r| r.slow_ns.max(r.slow_calls.min(1))),
            issues: p.issues.clone(),
        }
    }
}
