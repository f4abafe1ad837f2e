//! One side of a comparison: its logs read together in one pass by the analysis engine
//! (analysis::analyse_with, the logs cut into time slices on the way), and of each log
//! only what the comparison needs kept: its slices, a few end values, and its call sites.
//! The engine's state (the live tables) is dropped before the other side is read, so that
//! `compare` holds one side's analysis at a time.
use crate::analysis::{self, halve, Analysed, By, Section, SiteOptions, Slice};
use serde::Serialize;
use std::collections::BTreeMap;

/// Slices a side keeps in all (its logs' slices merged in pairs beyond this, down to
/// [`MIN_PER_LOG`] per log), which bounds the bootstrap's work for a group of many logs.
const MAX_PER_SIDE: usize = 1024;
const MIN_PER_LOG: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq, Serialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Every call recorded (no windows, or a capture window's log).
    Full,
    /// A watch log (window 0): RSS, stalls and the allocator's statistics, no calls.
    Watch,
    /// SHIM_RECORD=sample: sampled allocations and slow calls only.
    Sampled,
}

/// One log of a side.
pub struct Log {
    /// The executable's file name (not its directory: two builds of one program compare).
    pub exe: String,
    /// The program as the user named it, the resolved executable beside it where they
    /// differ (name.rs): how the report names it.
    pub name: String,
    pub backend: String,
    pub kind: Kind,
    pub slices: Vec<Slice>,
    /// The last RSS sample.
    pub rss_end: Option<u64>,
    /// Size-class waste of the log's own backend at the heap's peak (slop / live bytes).
    pub slop_share: Option<f64>,
    /// Memory over time for `report --vs`: (ns since the log's start, RSS or None, live
    /// bytes), at most [`MEMORY_POINTS`], evenly thinned.
    pub memory: Vec<(u64, Option<u64>, u64)>,
    /// The log's stacks folded by the measure `compare --flamegraph` draws (None: the log
    /// has no stacks, or no flame graph was asked for).
    pub folded: Option<Vec<String>>,
}

/// Memory samples a log keeps for the report's overlay (a chart's width).
pub const MEMORY_POINTS: usize = 1000;

fn thin<T: Copy>(v: &[T], n: usize) -> Vec<T> {
    if v.len() <= n {
        return v.to_vec();
    }
    let step = v.len() as f64 / n as f64;
    let mut out: Vec<T> = (0..n - 1).map(|i| v[(i as f64 * step) as usize]).collect();
    out.push(v[v.len() - 1]);
    out
}

/// A call site's numbers, averaged over the side's logs that have stacks.
#[derive(Clone, Copy, Default, Serialize, Debug)]
pub struct SiteNums {
    pub alloc_bytes: f64,
    pub live_at_peak_bytes: f64,
    pub timed_ns: f64,
}

pub struct Side {
    pub logs: Vec<Log>,
    /// Call sites by "function (location)"; None when no log of the side has stacks.
    pub sites: Option<BTreeMap<String, SiteNums>>,
    /// Whether the side's sites are estimates (sample mode).
    pub sites_estimated: bool,
}

impl Side {
    /// The logs that say how the run went over time (RSS, stalls, allocator statistics):
    /// the watch logs when the side has any (they cover the whole run, the windows only
    /// part of it), else every log.
    pub fn run_logs(&self) -> Vec<usize> {
        let watch: Vec<usize> = (0..self.logs.len()).filter(|&i| self.logs[i].kind == Kind::Watch).collect();
        if watch.is_empty() {
            (0..self.logs.len()).collect()
        } else {
            watch
        }
    }

    /// The logs that recorded every call (latency, calls, live bytes, slop).
    pub fn call_logs(&self) -> Vec<usize> {
        (0..self.logs.len()).filter(|&i| self.logs[i].kind == Kind::Full).collect()
    }

    pub fn kinds(&self) -> Vec<Kind> {
        let mut k: Vec<Kind> = Vec::new();
        for l in &self.logs {
            if !k.contains(&l.kind) {
                k.push(l.kind);
            }
        }
        k
    }

    /// The distinct executables' file names (whether the sides run one program), sorted.
    pub fn exes(&self) -> Vec<String> {
        distinct(self.logs.iter().map(|l| l.exe.clone()))
    }

    /// The distinct program names as started (name.rs), sorted.
    pub fn names(&self) -> Vec<String> {
        distinct(self.logs.iter().map(|l| l.name.clone()))
    }

    pub fn backends(&self) -> Vec<String> {
        distinct(self.logs.iter().map(|l| l.backend.clone()))
    }
}

fn distinct(it: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = it.collect();
    v.sort();
    v.dedup();
    v
}

/// Reads `paths` (one pass, the logs together as `stats` reads them), keeping each log's
/// stacks folded by `flame` (for `--flamegraph`).
pub fn read(paths: &[String], two: bool, so: &SiteOptions, flame: Option<By>) -> Result<Side, String> {
    let Analysed { sections, total, mut analyses, .. } = analysis::analyse_with(paths, 64, two, so, true)?;
    let own: Vec<&Section> = if sections.is_empty() { vec![&total] } else { sections.iter().collect() };
    let mut logs = Vec::with_capacity(paths.len());
    let mut sites: Option<BTreeMap<String, SiteNums>> = None;
    let mut with_stacks = 0usize;
    let mut estimated = false;
    for (i, s) in own.iter().enumerate() {
        let p = s.process.as_ref();
        let kind = match (p.and_then(|p| p.sampled_only), &s.watch) {
            (Some(_), _) => Kind::Sampled,
            (None, Some(w)) if w.window == 0 => Kind::Watch,
            _ => Kind::Full,
        };
        let exe = p.map(|p| p.exe.rsplit('/').next().unwrap_or(&p.exe).to_string()).unwrap_or_default();
        let name = p.map(|p| crate::name::shown(&p.exe, &p.cmdline)).unwrap_or_default();
        let slices = analyses[i].slices.take().map(|mut b| std::mem::take(&mut b.done)).unwrap_or_default();
        let rss_end = s.memory.rss_at_end.as_ref().map(|r| r.rss_bytes);
        let slop_share = s.slop.get(s.backend.as_str()).map(|b| b.at_peak.slop_share);
        if let Some(r) = &s.sites {
            with_stacks += 1;
            estimated |= r.estimated;
            let m = sites.get_or_insert_with(BTreeMap::new);
            let mut seen = BTreeMap::new();
            for row in r.by_bytes.iter().chain(&r.live_at_peak).chain(&r.by_time) {
                let key = match &row.location {
                    Some(l) => format!("{} ({l})", row.function),
                    None => format!("{} [{}]", row.function, row.object),
                };
                seen.insert(
                    key,
                    SiteNums {
                        alloc_bytes: row.alloc_bytes as f64,
                        live_at_peak_bytes: row.live_at_peak_bytes as f64,
                        timed_ns: row.timed_ns as f64,
                    },
                );
            }
            for (k, v) in seen {
                let e = m.entry(k).or_default();
                e.alloc_bytes += v.alloc_bytes;
                e.live_at_peak_bytes += v.live_at_peak_bytes;
                e.timed_ns += v.timed_ns;
            }
        }
        let samples: Vec<(u64, Option<u64>, u64)> = s
            .memory
            .samples
            .iter()
            .map(|m| (m.ts_ns, m.rss_bytes, m.max_live_bytes.max(m.live_bytes)))
            .collect();
        let memory = thin(&samples, MEMORY_POINTS);
        // A measure with nothing to draw is absent from the section's graphs: no lines.
        let folded = flame.zip(s.folded.as_ref()).map(|(by, f)| {
            f.graphs.iter().find(|(b, _)| *b == by).map(|(_, l)| l.clone()).unwrap_or_default()
        });
        logs.push(Log {
            exe,
            name,
            backend: s.backend.clone(),
            kind,
            slices,
            rss_end,
            slop_share,
            memory,
            folded,
        });
    }
    if let Some(m) = sites.as_mut() {
        for v in m.values_mut() {
            let n = with_stacks as f64;
            (v.alloc_bytes, v.live_at_peak_bytes, v.timed_ns) =
                (v.alloc_bytes / n, v.live_at_peak_bytes / n, v.timed_ns / n);
        }
    }
    drop((analyses, sections, total));
    // The live tables just freed go back to the OS before the other side is read (glibc
    // keeps them otherwise, and the two sides' peaks would add up).
    // SAFETY: malloc_trim only releases free memory of the C allocator.
    unsafe { libc::malloc_trim(0) };
    // Bounded bootstrap work: a group of many logs keeps fewer, wider slices per log.
    let per_log = (MAX_PER_SIDE / logs.len().max(1)).max(MIN_PER_LOG);
    for l in &mut logs {
        while l.slices.len() > per_log {
            l.slices = halve(std::mem::take(&mut l.slices));
        }
    }
    Ok(Side { logs, sites, sites_estimated: estimated })
}
