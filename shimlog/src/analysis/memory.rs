//! Memory over time: live bytes and blocks beside each RSS sample of the log, the peak of
//! live bytes and the RSS near it, and RSS / live at the peak and at the end (a
//! fragmentation estimate: what the process holds per byte the program asked for).
//!
//! A log without RSS records (a very short run) gets its live series on a 100 ms grid.
use serde::Serialize;

pub const GRID_NS: u64 = 100_000_000;

#[derive(Serialize, Clone, Copy, Debug, Default)]
pub struct Sample {
    pub ts_ns: u64,
    /// None on the 100 ms grid of a log without RSS records.
    pub rss_bytes: Option<u64>,
    pub live_bytes: u64,
    pub live_blocks: u64,
    /// The most live bytes since the previous sample.
    pub max_live_bytes: u64,
}

#[derive(Clone, Default)]
pub struct Memory {
    samples: Vec<Sample>,
    grid: Vec<Sample>,
    next_grid: u64,
    max_since_rss: u64,
    max_since_grid: u64,
    last_rss: Option<(u64, u64)>,
    peak_rss: u64,
    /// RSS samples on either side of the peak of live bytes.
    before_peak: Option<(u64, u64)>,
    after_peak: Option<(u64, u64)>,
    peak_ts: u64,
    peak_live: u64,
}

impl Memory {
    pub fn new() -> Memory {
        Memory { next_grid: GRID_NS, ..Default::default() }
    }

    /// Live bytes grew to `live`.
    #[inline(always)]
    pub fn grew(&mut self, live: u64) {
        self.max_since_rss = self.max_since_rss.max(live);
        self.max_since_grid = self.max_since_grid.max(live);
    }

    /// Live bytes reached a new peak at `ts`.
    #[inline(always)]
    pub fn peak(&mut self, ts: u64, live: u64) {
        self.before_peak = self.last_rss;
        self.after_peak = None;
        self.peak_ts = ts;
        self.peak_live = live;
    }

    /// Call with each event's time: takes the grid samples that are due.
    #[inline(always)]
    pub fn tick(&mut self, ts: u64, live: u64, blocks: u64) {
        if ts >= self.next_grid {
            self.grid_sample(ts, live, blocks);
        }
    }

    #[cold]
    fn grid_sample(&mut self, ts: u64, live: u64, blocks: u64) {
        // One sample per grid step crossed (the state is the same at each: nothing happened).
        while ts >= self.next_grid {
            self.grid.push(Sample {
                ts_ns: self.next_grid,
                rss_bytes: None,
                live_bytes: live,
                live_blocks: blocks,
                max_live_bytes: self.max_since_grid.max(live),
            });
            self.max_since_grid = live;
            self.next_grid += GRID_NS;
        }
    }

    /// An RSS record.
    pub fn rss(&mut self, ts: u64, rss: u64, live: u64, blocks: u64) {
        self.samples.push(Sample {
            ts_ns: ts,
            rss_bytes: Some(rss),
            live_bytes: live,
            live_blocks: blocks,
            max_live_bytes: self.max_since_rss.max(live),
        });
        self.max_since_rss = live;
        self.last_rss = Some((ts, rss));
        self.peak_rss = self.peak_rss.max(rss);
        if self.after_peak.is_none() && self.peak_live > 0 {
            self.after_peak = Some((ts, rss));
        }
    }

    pub fn report(&self, end_ts: u64, live: u64, blocks: u64) -> MemoryReport {
        let (from, mut samples) = if self.samples.is_empty() {
            ("grid_100ms", self.grid.clone())
        } else {
            ("rss", self.samples.clone())
        };
        if from == "grid_100ms" && samples.last().is_none_or(|s| s.ts_ns < end_ts) {
            samples.push(Sample {
                ts_ns: end_ts,
                rss_bytes: None,
                live_bytes: live,
                live_blocks: blocks,
                max_live_bytes: self.max_since_grid.max(live),
            });
        }
        // The RSS sample nearest in time to the peak.
        let near = match (self.before_peak, self.after_peak) {
            (Some(b), Some(a)) => Some(if self.peak_ts - b.0 <= a.0 - self.peak_ts { b } else { a }),
            (b, a) => b.or(a),
        };
        let rss_at_peak = near.map(|(ts, rss)| RssAt {
            ts_ns: ts,
            rss_bytes: rss,
            live_bytes: self.peak_live,
            rss_per_live: per(rss, self.peak_live),
        });
        let at_end = self.last_rss.map(|(ts, rss)| RssAt {
            ts_ns: ts,
            rss_bytes: rss,
            live_bytes: live,
            rss_per_live: per(rss, live),
        });
        MemoryReport {
            samples_from: from,
            peak_rss_bytes: self.last_rss.map(|_| self.peak_rss),
            rss_at_peak,
            rss_at_end: at_end,
            samples,
        }
    }
}

fn per(rss: u64, live: u64) -> Option<f64> {
    (live > 0).then(|| rss as f64 / live as f64)
}

#[derive(Serialize, Clone, Debug)]
pub struct MemoryReport {
    /// "rss": one sample per RSS record; "grid_100ms": the log has none.
    pub samples_from: &'static str,
    pub peak_rss_bytes: Option<u64>,
    /// The RSS sample nearest the peak of live bytes, and RSS / live there.
    pub rss_at_peak: Option<RssAt>,
    /// The last RSS sample, and RSS / bytes live at the end.
    pub rss_at_end: Option<RssAt>,
    pub samples: Vec<Sample>,
}

#[derive(Serialize, Clone, Debug)]
pub struct RssAt {
    pub ts_ns: u64,
    pub rss_bytes: u64,
    pub live_bytes: u64,
    /// None when nothing was live.
    pub rss_per_live: Option<f64>,
}
