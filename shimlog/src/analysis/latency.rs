//! Time spent inside the allocator: per-operation percentiles of the recorded backend time
//! (every call or a sample, as SHIM_TIMING chose, plus every call that stayed over 1 ms),
//! and the slowest calls, so that a stall is found in one look.
use super::fasthist::FastHist;
use recorder::{Event, Op};
use serde::Serialize;
use std::collections::BTreeMap;

/// How many of the slowest calls the report lists.
pub const SLOWEST: usize = 20;

#[derive(Clone)]
pub struct Latency {
    /// Indexed by `op as usize - 1` (the allocation ops are 1..=10); three significant
    /// digits.
    per_op: Vec<FastHist<3>>,
    /// The slowest calls, slowest first; `floor` is the time a call must exceed to enter.
    slowest: Vec<SlowCall>,
    floor: u64,
    pid: u32,
}

impl Latency {
    pub fn new(pid: u32) -> Latency {
        Latency {
            per_op: (0..Op::ALLOC_OPS.len()).map(|_| FastHist::default()).collect(),
            slowest: Vec::with_capacity(SLOWEST + 1),
            floor: 0,
            pid,
        }
    }

    /// Starts loading the count that a backend time of `ns` for `op` will increment (the
    /// counts of a 3-digit histogram spread over many lines, which the live table's traffic
    /// keeps evicting).
    #[inline(always)]
    pub fn prefetch(&self, op: Op, ns: u64) {
        if let Some(h) = self.per_op.get((op as usize).wrapping_sub(1)) {
            h.prefetch(ns);
        }
    }

    /// `e` took `ns` inside the backend; `freed` tells the size of the block it frees (free,
    /// or realloc of a live block), asked only when the call is among the slowest.
    #[inline(always)]
    pub fn record(&mut self, e: &Event, ns: u64, freed: impl FnOnce() -> Option<u64>) {
        self.per_op[e.op as usize - 1].record(ns);
        if ns > self.floor || self.slowest.len() < SLOWEST {
            self.slow(e, ns, freed());
        }
    }

    #[cold]
    fn slow(&mut self, e: &Event, ns: u64, freed: Option<u64>) {
        let c = SlowCall {
            backend_ns: ns,
            ts_ns: e.ts_ns,
            pid: self.pid,
            tid: e.tid,
            op: e.op.name(),
            size: e.requested(),
            freed_bytes: freed,
        };
        self.insert(c);
    }

    fn insert(&mut self, c: SlowCall) {
        let at = self.slowest.partition_point(|x| x.backend_ns >= c.backend_ns);
        self.slowest.insert(at, c);
        self.slowest.truncate(SLOWEST);
        if self.slowest.len() == SLOWEST {
            self.floor = self.slowest[SLOWEST - 1].backend_ns;
        }
    }

    pub fn merge(&mut self, o: &Latency, offset_ns: u64) {
        for (a, b) in self.per_op.iter_mut().zip(&o.per_op) {
            a.add(b);
        }
        for c in &o.slowest {
            let mut c = c.clone();
            c.ts_ns += offset_ns;
            self.insert(c);
        }
    }

    /// Each operation's timed calls as a histogram (only operations with timed calls).
    pub fn histograms(&self) -> Vec<(&'static str, hdrhistogram::Histogram<u64>)> {
        (self.per_op.iter().enumerate())
            .filter(|(_, f)| !f.is_empty())
            .map(|(i, f)| (Op::ALLOC_OPS[i].name(), f.to_hdr()))
            .collect()
    }

    pub fn report(&self) -> LatencyReport {
        let mut per_op = BTreeMap::new();
        let mut timed = 0;
        for (i, f) in self.per_op.iter().enumerate() {
            if f.is_empty() {
                continue;
            }
            let h = f.to_hdr();
            timed += h.len();
            per_op.insert(
                Op::ALLOC_OPS[i].name(),
                OpLatency {
                    timed_calls: h.len(),
                    p50_ns: h.value_at_quantile(0.5),
                    p90_ns: h.value_at_quantile(0.9),
                    p99_ns: h.value_at_quantile(0.99),
                    p999_ns: h.value_at_quantile(0.999),
                    max_ns: h.max(),
                    mean_ns: h.mean(),
                },
            );
        }
        LatencyReport { timed_calls: timed, per_op, slowest: self.slowest.clone() }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct SlowCall {
    pub backend_ns: u64,
    pub ts_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub op: &'static str,
    /// Bytes requested (0 for free).
    pub size: u64,
    /// The size of the block the call freed (free, or realloc of a live block); null when
    /// it freed none or the block's allocation is not in the log.
    pub freed_bytes: Option<u64>,
}

#[derive(Serialize, Clone, Debug)]
pub struct LatencyReport {
    /// Calls that carry a backend time.
    pub timed_calls: u64,
    /// Keyed by C function name; only operations with timed calls.
    pub per_op: BTreeMap<&'static str, OpLatency>,
    /// The slowest calls, slowest first.
    pub slowest: Vec<SlowCall>,
}

#[derive(Serialize, Clone, Debug)]
pub struct OpLatency {
    pub timed_calls: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}
