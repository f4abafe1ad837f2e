//! The metrics `compare` puts side by side (their names are part of the interface:
//! `--fail-if`, `--json`, docs/compare.md), and how each is computed from a draw of a side's
//! logs and time slices ([`Acc`]): the same function gives the point estimate (every log,
//! every slice once) and each bootstrap replicate (boot.rs).
use super::side::Side;
use crate::analysis::{bucket_value, Slice, BUCKETS, OPS};
use recorder::Op;
use serde::Serialize;

#[derive(Clone, Copy, PartialEq, Eq, Serialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    Latency,
    Rates,
    Memory,
    AllocatorStats,
}

impl Group {
    pub const ALL: [Group; 4] = [Group::Latency, Group::Rates, Group::Memory, Group::AllocatorStats];

    pub fn title(self) -> &'static str {
        match self {
            Group::Latency => "time inside the allocator, per call",
            Group::Rates => "calls and stalls",
            Group::Memory => "memory",
            Group::AllocatorStats => "the allocator's own statistics (watch logs)",
        }
    }

    /// The smallest relative change reported as a difference (see docs/compare.md: the
    /// interval sees the noise within a run, not what differs between two runs as a whole).
    pub fn floor(self) -> f64 {
        match self {
            Group::Latency => 0.25,
            Group::Rates => 0.10,
            Group::Memory | Group::AllocatorStats => 0.05,
        }
    }
}

/// What a metric's values are, for printing and for `--fail-if`'s absolute thresholds.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum Dim {
    Ns,
    Bytes,
    PerSecond,
    PerHour,
    /// A plain ratio (RSS per live byte) or share (slop per live byte).
    Ratio,
    Count,
}

/// Which of a side's logs a metric is computed from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// Logs that recorded every call.
    Calls,
    /// The watch logs when the side has any, else every log.
    Run,
}

#[derive(Clone, Debug)]
pub struct Def {
    pub name: String,
    pub group: Group,
    pub dim: Dim,
    pub role: Role,
    pub what: &'static str,
    /// One value per log, the same in every draw of its slices (no interval from one log).
    pub per_log: bool,
    /// Set by the slowest few calls of a run (p99.9, the slowest call, the stalls), by the
    /// machine's speed (calls_per_s) or by one instant of it (rss_end): judged like latency
    /// (see [`Def::judged`]).
    pub tail: bool,
}

impl Def {
    /// Whether a change of this metric can be called one from `logs` (the fewer side's
    /// logs). Time inside the allocator and the stalls are set by how each run went as much
    /// as by the program and its allocator: on this loaded machine two runs of one program
    /// (the same calls on the same backend) had malloc's median at 49 and 135 ns, free's
    /// p99.9 at 1.2 and 16 us, 6 stalls and none, each run's slices agreeing with their run;
    /// and with two runs a side, taken in turns, malloc's median at 129 against 55 ns and
    /// alloc_p999 near 11 us against 2 us. One run's slices, or two runs resampled, cannot
    /// show that spread; [`JUDGE_LOGS`] runs a side begin to.
    ///
    /// Memory and calls are judged from two logs a side or more, and from fewer than
    /// [`JUDGE_LOGS`] only when every log of both sides is at least [`MIN_JUDGE_NS`] long
    /// (`shortest_ns`). One run a side cannot show how much the next run would differ: on
    /// 20 pairs of runs of the bench workloads, each pair twice the same configuration and
    /// about 2.5 s long, one run a side had 24 metrics flagged (RSS peak and mean 5-20%
    /// apart, a multi-threaded program's live bytes 40-100% apart, each run's slices
    /// agreeing with their run); two runs a side, drawn from in the bootstrap, see that
    /// spread (bench/compare.py, docs/compare.md). Runs under 1.5 s have their RSS sampled a
    /// few times and their start-up most of the run.
    pub fn judged(&self, logs: usize, shortest_ns: u64) -> bool {
        if logs >= JUDGE_LOGS {
            return true;
        }
        if self.tail || self.group == Group::Latency || logs < 2 {
            return false;
        }
        shortest_ns >= MIN_JUDGE_NS
    }
}

/// The shortest log from which memory and calls are judged with fewer than [`JUDGE_LOGS`]
/// logs a side.
pub const MIN_JUDGE_NS: u64 = 1_500_000_000;

/// Logs a side from which latency and stalls are judged.
pub const JUDGE_LOGS: usize = 5;

/// A change smaller than this (in the metric's unit) is never reported: for times, a few
/// of the clock's ticks (a timed call is rounded to 16 TSC ticks) and its reading.
pub fn abs_floor(d: Dim) -> f64 {
    match d {
        Dim::Ns => 50.0,
        _ => 0.0,
    }
}

/// The fixed metrics (the allocator's statistics are added per name: `stat_NAME`).
pub const FIXED: [(&str, Group, Dim, Role, &str); 17] = [
    (
        "alloc_p50",
        Group::Latency,
        Dim::Ns,
        Role::Calls,
        "median time inside the allocator of the timed calls",
    ),
    ("alloc_p90", Group::Latency, Dim::Ns, Role::Calls, "90th percentile"),
    ("alloc_p99", Group::Latency, Dim::Ns, Role::Calls, "99th percentile"),
    ("alloc_p999", Group::Latency, Dim::Ns, Role::Calls, "99.9th percentile"),
    ("alloc_max", Group::Latency, Dim::Ns, Role::Calls, "slowest timed call"),
    ("calls_per_s", Group::Rates, Dim::PerSecond, Role::Calls, "allocator calls per second of the run"),
    (
        "stalls_per_hour",
        Group::Rates,
        Dim::PerHour,
        Role::Run,
        "calls over 1 ms inside the allocator, per hour",
    ),
    ("stall_max", Group::Rates, Dim::Ns, Role::Run, "the longest stall"),
    ("rss_peak", Group::Memory, Dim::Bytes, Role::Run, "highest RSS sample"),
    ("rss_mean", Group::Memory, Dim::Bytes, Role::Run, "RSS averaged over time"),
    ("rss_end", Group::Memory, Dim::Bytes, Role::Run, "last RSS sample"),
    ("live_peak", Group::Memory, Dim::Bytes, Role::Calls, "most bytes live at once"),
    ("live_mean", Group::Memory, Dim::Bytes, Role::Calls, "live bytes averaged over time"),
    ("rss_per_live", Group::Memory, Dim::Ratio, Role::Calls, "fragmentation: mean RSS / mean live bytes"),
    ("slop", Group::Memory, Dim::Ratio, Role::Calls, "size-class waste at the peak / live bytes"),
    ("calls", Group::Rates, Dim::Count, Role::Calls, "allocator calls per log"),
    ("timed_calls", Group::Latency, Dim::Count, Role::Calls, "calls with a backend time, per log"),
];

/// Names `--fail-if` accepts (beside stat_NAME).
pub fn names() -> Vec<&'static str> {
    FIXED.iter().map(|f| f.0).collect()
}

pub fn fixed(name: &str) -> Option<Def> {
    FIXED.iter().find(|f| f.0 == name).map(|f| Def {
        name: f.0.to_string(),
        group: f.1,
        dim: f.2,
        role: f.3,
        what: f.4,
        per_log: matches!(f.0, "rss_end" | "slop"),
        // calls_per_s too: how fast the machine ran the program (a paced run that falls
        // behind under load makes fewer calls a second) is not the program's doing. And
        // rss_end: one sample a run, at one instant (before or after the program's last
        // frees reached the OS, how far a multi-threaded program's consumers had fallen
        // behind): two runs a side of one configuration had it 15% and 50% apart, each side's
        // two runs close together (bench/compare.py), which no interval from two runs covers.
        tail: matches!(
            f.0,
            "alloc_p999" | "alloc_max" | "stall_max" | "stalls_per_hour" | "calls_per_s" | "rss_end"
        ),
    })
}

/// Quantiles listed per C function (beside every call's, alloc_*).
const OP_QUANTILES: [(&str, f64); 3] = [("p50", 0.5), ("p99", 0.99), ("p999", 0.999)];

/// The metrics of two sides: the fixed ones, the quantiles of each C function both sides
/// timed (`malloc_p99`...), then each allocator statistic both report.
pub fn defs(a: &Side, b: &Side) -> Vec<Def> {
    let mut v: Vec<Def> = FIXED.iter().map(|f| fixed(f.0).expect("fixed")).collect();
    let (oa, ob) = (timed_ops(a), timed_ops(b));
    for o in (0..OPS).filter(|o| oa[*o] && ob[*o]) {
        for (q, _) in OP_QUANTILES {
            v.push(Def {
                name: format!("{}_{q}", Op::ALLOC_OPS[o].name()),
                group: Group::Latency,
                dim: Dim::Ns,
                role: Role::Calls,
                what: "this C function's timed calls",
                per_log: false,
                tail: q == "p999",
            });
        }
    }
    let (sa, sb) = (stat_names(a), stat_names(b));
    for n in sa.iter().filter(|n| sb.contains(n)) {
        v.push(Def {
            name: format!("stat_{n}"),
            group: Group::AllocatorStats,
            dim: if n.contains("fault") { Dim::Count } else { Dim::Bytes },
            role: Role::Run,
            what: "mean of the watch log's samples",
            per_log: false,
            tail: false,
        });
    }
    v
}

/// Which C functions have timed calls in the side's logs.
fn timed_ops(s: &Side) -> [bool; OPS] {
    let mut seen = [false; OPS];
    for i in s.call_logs() {
        for sl in &s.logs[i].slices {
            for &(b, _) in &sl.timed {
                seen[b as usize / BUCKETS] = true;
            }
        }
    }
    seen
}

/// A per-function metric's function and quantile (`malloc_p99`: malloc's, 0.99).
pub fn op_quantile(name: &str) -> Option<(usize, f64)> {
    let (op, q) = name.rsplit_once('_')?;
    let q = OP_QUANTILES.iter().find(|x| x.0 == q)?.1;
    let o = Op::ALLOC_OPS.iter().position(|x| x.name() == op)?;
    Some((o, q))
}

pub fn stat_names(s: &Side) -> Vec<&'static str> {
    let mut v: Vec<&'static str> =
        s.logs.iter().flat_map(|l| l.slices.iter().flat_map(|x| x.stats.iter().map(|t| t.0))).collect();
    v.sort();
    v.dedup();
    v
}

/// What one drawn log adds up to: its slices as drawn (repeats allowed), or all of them once
/// (made once per log when its logs are what is drawn: boot.rs).
#[derive(Clone, Default)]
pub struct LogSum {
    /// The timed calls' histograms, sparse: (op x BUCKETS + bucket, count), by key.
    timed: Vec<(u32, u64)>,
    calls: u64,
    dur_ns: u64,
    stalls: u64,
    stall_max: u64,
    rss_byte_ns: f64,
    rss_ns: u64,
    live_byte_ns: f64,
    frag_rss: f64,
    frag_live: f64,
    rss_max: u64,
    live_max: u64,
    stats: Vec<(&'static str, f64, u64)>,
    rss_end: Option<u64>,
    slop_share: Option<f64>,
}

impl LogSum {
    /// `log`'s slices `slices` (indices, repeats allowed); `hist`: with the timed calls.
    pub fn of(log: &super::side::Log, slices: impl Iterator<Item = usize>, hist: bool) -> LogSum {
        let mut l = LogSum { rss_end: log.rss_end, slop_share: log.slop_share, ..LogSum::default() };
        let mut timed: Vec<(u32, u64)> = Vec::new();
        for i in slices {
            let s: &Slice = &log.slices[i];
            if hist {
                timed.extend_from_slice(&s.timed);
            }
            l.calls += s.calls;
            l.dur_ns += s.dur_ns;
            l.stalls += s.stalls;
            l.stall_max = l.stall_max.max(s.max_stall_ns);
            l.rss_byte_ns += s.rss_byte_ns as f64;
            l.rss_ns += s.rss_ns;
            l.live_byte_ns += s.live_byte_ns as f64;
            if s.rss_ns > 0 && s.dur_ns > 0 {
                l.frag_rss += s.rss_byte_ns as f64;
                l.frag_live += s.live_byte_ns as f64 * s.rss_ns as f64 / s.dur_ns as f64;
            }
            l.rss_max = l.rss_max.max(s.rss_max);
            l.live_max = l.live_max.max(s.live_max);
            for &(n, sum, k) in &s.stats {
                match l.stats.iter_mut().find(|x| x.0 == n) {
                    Some(x) => (x.1, x.2) = (x.1 + sum, x.2 + k),
                    None => l.stats.push((n, sum, k)),
                }
            }
        }
        timed.sort_unstable_by_key(|x| x.0);
        for (b, c) in timed {
            match l.timed.last_mut() {
                Some(x) if x.0 == b => x.1 += c,
                _ => l.timed.push((b, c)),
            }
        }
        l
    }
}

/// What a draw of one role's logs and slices adds up to.
pub struct Acc {
    /// Per op (BUCKETS each, made when the op is first drawn), and every op's together
    /// (after [`Acc::finish`]); no histograms at all for a draw without latency.
    with_hist: bool,
    hist: Vec<Vec<u64>>,
    pooled: Vec<u64>,
    timed_op: [u64; OPS],
    timed: u64,
    calls: u64,
    dur_ns: u64,
    stalls: u64,
    stall_max: u64,
    rss_byte_ns: f64,
    rss_ns: u64,
    live_byte_ns: f64,
    /// RSS x time and live x time over the time where RSS is known (fragmentation).
    frag_rss: f64,
    frag_live: f64,
    rss_peak: (f64, u64),
    live_peak: (f64, u64),
    rss_end: (f64, u64),
    slop: (f64, u64),
    stats: Vec<(&'static str, f64, u64)>,
    logs: u64,
}

impl Acc {
    pub fn new(with_hist: bool) -> Acc {
        Acc {
            with_hist,
            hist: vec![Vec::new(); OPS],
            pooled: Vec::new(),
            timed_op: [0; OPS],
            timed: 0,
            calls: 0,
            dur_ns: 0,
            stalls: 0,
            stall_max: 0,
            rss_byte_ns: 0.0,
            rss_ns: 0,
            live_byte_ns: 0.0,
            frag_rss: 0.0,
            frag_live: 0.0,
            rss_peak: (0.0, 0),
            live_peak: (0.0, 0),
            rss_end: (0.0, 0),
            slop: (0.0, 0),
            stats: Vec::new(),
            logs: 0,
        }
    }

    /// One drawn log's sums (its slices as drawn, or all of them once).
    pub fn add(&mut self, l: &LogSum) {
        self.logs += 1;
        if self.with_hist {
            for &(b, c) in &l.timed {
                let (o, b) = (b as usize / BUCKETS, b as usize % BUCKETS);
                let h = &mut self.hist[o];
                if h.is_empty() {
                    *h = vec![0; BUCKETS];
                }
                h[b] += c;
                self.timed_op[o] += c;
                self.timed += c;
            }
        }
        self.calls += l.calls;
        self.dur_ns += l.dur_ns;
        self.stalls += l.stalls;
        self.stall_max = self.stall_max.max(l.stall_max);
        self.rss_byte_ns += l.rss_byte_ns;
        self.rss_ns += l.rss_ns;
        self.live_byte_ns += l.live_byte_ns;
        self.frag_rss += l.frag_rss;
        self.frag_live += l.frag_live;
        for &(n, sum, k) in &l.stats {
            match self.stats.iter_mut().find(|x| x.0 == n) {
                Some(x) => (x.1, x.2) = (x.1 + sum, x.2 + k),
                None => self.stats.push((n, sum, k)),
            }
        }
        if l.rss_max > 0 {
            self.rss_peak = (self.rss_peak.0 + l.rss_max as f64, self.rss_peak.1 + 1);
        }
        self.live_peak = (self.live_peak.0 + l.live_max as f64, self.live_peak.1 + 1);
        if let Some(r) = l.rss_end {
            self.rss_end = (self.rss_end.0 + r as f64, self.rss_end.1 + 1);
        }
        if let Some(s) = l.slop_share {
            self.slop = (self.slop.0 + s, self.slop.1 + 1);
        }
    }

    /// Every op's histogram added into one (call once the draw is complete).
    pub fn finish(&mut self) {
        if !self.with_hist || self.timed == 0 {
            return;
        }
        self.pooled = vec![0; BUCKETS];
        for h in self.hist.iter().filter(|h| !h.is_empty()) {
            for (p, &c) in self.pooled.iter_mut().zip(h) {
                *p += c;
            }
        }
    }

    /// A quantile of the drawn timed calls (bucket values, to 1%): of every call, or of one
    /// op's.
    fn quantile(&self, q: f64, op: Option<usize>) -> Option<f64> {
        let (h, n) = match op {
            Some(o) => (&self.hist[o][..], self.timed_op[o]),
            None => (&self.pooled[..], self.timed),
        };
        if n == 0 {
            return None;
        }
        let want = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut cum = 0;
        for (i, &c) in h.iter().enumerate() {
            cum += c;
            if cum >= want {
                return Some(bucket_value(i as u32) as f64);
            }
        }
        None
    }

    fn max_timed(&self) -> Option<f64> {
        let i = self.pooled.iter().rposition(|&c| c > 0)?;
        Some(bucket_value(i as u32) as f64)
    }

    /// The metric `name`'s value (None: not measurable from this draw).
    pub fn value(&self, name: &str) -> Option<f64> {
        let mean = |(s, n): (f64, u64)| (n > 0).then(|| s / n as f64);
        let per_log = |v: u64| (self.logs > 0).then(|| v as f64 / self.logs as f64);
        let secs = self.dur_ns as f64 / 1e9;
        match name {
            "alloc_p50" => self.quantile(0.5, None),
            "alloc_p90" => self.quantile(0.9, None),
            "alloc_p99" => self.quantile(0.99, None),
            "alloc_p999" => self.quantile(0.999, None),
            "alloc_max" => self.max_timed(),
            "timed_calls" => per_log(self.timed).filter(|_| self.timed > 0),
            "calls" => per_log(self.calls).filter(|_| self.calls > 0),
            "calls_per_s" => (secs > 0.0 && self.calls > 0).then(|| self.calls as f64 / secs),
            "stalls_per_hour" => (secs > 0.0).then(|| self.stalls as f64 * 3600.0 / secs),
            "stall_max" => (secs > 0.0).then_some(self.stall_max as f64),
            "rss_peak" => mean(self.rss_peak),
            "rss_mean" => (self.rss_ns > 0).then(|| self.rss_byte_ns / self.rss_ns as f64),
            "rss_end" => mean(self.rss_end),
            "live_peak" => mean(self.live_peak).filter(|_| self.calls > 0),
            "live_mean" => {
                (self.dur_ns > 0 && self.calls > 0).then(|| self.live_byte_ns / self.dur_ns as f64)
            }
            "rss_per_live" => (self.frag_live > 0.0).then(|| self.frag_rss / self.frag_live),
            "slop" => mean(self.slop),
            n if op_quantile(n).is_some() => {
                let (o, q) = op_quantile(n)?;
                self.quantile(q, Some(o))
            }
            n => {
                let n = n.strip_prefix("stat_")?;
                self.stats.iter().find(|x| x.0 == n).and_then(|x| (x.2 > 0).then(|| x.1 / x.2 as f64))
            }
        }
    }
}
