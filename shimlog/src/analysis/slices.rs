//! The run cut into time slices, for `shimlog compare`'s bootstrap (compare/): per slice, the
//! calls, the timed calls' backend times (a 2-digit histogram, kept sparse once the slice
//! closes), the stalls, RSS and live bytes weighted by time and at their highest, and the
//! allocator's own statistics. Filled in the same pass as everything else (one call per
//! event from [`super::Analysis::feed`], only when asked for), in bounded memory: slices
//! start 10 ms wide, and whenever there are [`MAX_SLICES`] closed ones, neighbours merge in
//! pairs and the width doubles, so that a log ends with 64 to 128 of them (fewer only for
//! a run shorter than 1.28 s).
use super::fasthist::FastHist;
use recorder::{alloc_stat_name, Event, Op};

/// At most this many closed slices are kept (then pairs merge).
pub const MAX_SLICES: usize = 128;
const FIRST_WIDTH_NS: u64 = 10_000_000;
/// A timed call at least this long inside the allocator is a stall (SHIM_STALL's default;
/// the log header does not say the run's own setting).
pub const STALL_NS: u64 = 1_000_000;

#[derive(Clone, Debug, Default)]
pub struct Slice {
    pub start_ns: u64,
    pub dur_ns: u64,
    /// Allocator calls (the malloc family).
    pub calls: u64,
    /// Timed calls' backend times: (op index x [`BUCKETS`] + bucket of a 2-digit histogram,
    /// count), in that order; the op index is `op as usize - 1` (Op::ALLOC_OPS).
    pub timed: Vec<(u32, u64)>,
    pub stalls: u64,
    pub max_stall_ns: u64,
    /// Sum of RSS x ns over the part of the slice where RSS was known, and that part's length.
    pub rss_byte_ns: u128,
    pub rss_ns: u64,
    /// Highest RSS sample in the slice (0: none).
    pub rss_max: u64,
    /// Sum of live bytes x ns over the slice, and the most live at once.
    pub live_byte_ns: u128,
    pub live_max: u64,
    /// The allocator's own statistics (watch logs): name, sum of samples, samples.
    pub stats: Vec<(&'static str, f64, u64)>,
}

impl Slice {
    /// Adds the next slice `o` (its neighbour in time) into this one.
    fn absorb(&mut self, o: Slice) {
        self.dur_ns += o.dur_ns;
        self.calls += o.calls;
        self.timed = merge_sparse(&self.timed, &o.timed);
        self.stalls += o.stalls;
        self.max_stall_ns = self.max_stall_ns.max(o.max_stall_ns);
        self.rss_byte_ns += o.rss_byte_ns;
        self.rss_ns += o.rss_ns;
        self.rss_max = self.rss_max.max(o.rss_max);
        self.live_byte_ns += o.live_byte_ns;
        self.live_max = self.live_max.max(o.live_max);
        for (n, s, k) in o.stats {
            self.stat(n, s, k);
        }
    }

    fn stat(&mut self, name: &'static str, sum: f64, n: u64) {
        match self.stats.iter_mut().find(|x| x.0 == name) {
            Some(x) => (x.1, x.2) = (x.1 + sum, x.2 + n),
            None => self.stats.push((name, sum, n)),
        }
    }
}

/// Neighbouring slices merged in pairs (an odd last one stays as it is).
pub fn halve(v: Vec<Slice>) -> Vec<Slice> {
    let mut out = Vec::with_capacity(v.len().div_ceil(2));
    let mut it = v.into_iter();
    while let Some(mut a) = it.next() {
        if let Some(b) = it.next() {
            a.absorb(b);
        }
        out.push(a);
    }
    out
}

/// Two sparse histograms (sorted by bucket) added.
pub fn merge_sparse(a: &[(u32, u64)], b: &[(u32, u64)]) -> Vec<(u32, u64)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let take_a = j == b.len() || (i < a.len() && a[i].0 < b[j].0);
        let take_b = i == a.len() || (j < b.len() && b[j].0 < a[i].0);
        if take_a {
            out.push(a[i]);
            i += 1;
        } else if take_b {
            out.push(b[j]);
            j += 1;
        } else {
            out.push((a[i].0, a[i].1 + b[j].1));
            i += 1;
            j += 1;
        }
    }
    out.shrink_to_fit();
    out
}

/// The value a bucket of the slices' histograms stands for (its lowest).
pub fn bucket_value(i: u32) -> u64 {
    FastHist::<2>::lowest(i as usize)
}

/// Buckets in the slices' histograms (of one op).
pub const BUCKETS: usize = FastHist::<2>::LEN;
/// Ops with a histogram of their own.
pub const OPS: usize = Op::ALLOC_OPS.len();

pub struct Slices {
    width: u64,
    start: u64,
    end: u64,
    last_ts: u64,
    rss: Option<u64>,
    /// Stalls are the log's stall records (a watch log), not its timed calls.
    stall_records: bool,
    cur: Slice,
    /// The open slice's histograms, one per op (made on first use).
    hist: Vec<Option<FastHist<2>>>,
    pub done: Vec<Slice>,
    pub rss_last: Option<u64>,
}

impl Slices {
    /// `watch_log`: the log is a watch log (window 0), whose stalls are records of their own.
    pub fn new(watch_log: bool) -> Slices {
        Slices {
            width: FIRST_WIDTH_NS,
            start: 0,
            end: FIRST_WIDTH_NS,
            last_ts: 0,
            rss: None,
            stall_records: watch_log,
            cur: Slice::default(),
            hist: vec![None; OPS],
            done: Vec::new(),
            rss_last: None,
        }
    }

    /// One event, before the analysis takes it: `live`, the bytes live until now.
    #[inline(always)]
    pub fn take(&mut self, e: &Event, live: u64) {
        let ts = e.ts_ns;
        if ts >= self.end {
            self.cross(ts, live);
        }
        self.weigh(ts, live);
        if e.op.is_alloc_family() {
            self.cur.calls += 1;
            if let Some(ns) = e.backend_ns() {
                if let Some(h) = self.hist.get_mut(e.op as usize - 1) {
                    h.get_or_insert_with(FastHist::default).record(ns);
                }
                if ns >= STALL_NS && !self.stall_records {
                    self.stall(ns);
                }
            }
        } else {
            self.record(e);
        }
    }

    #[inline(always)]
    fn weigh(&mut self, ts: u64, live: u64) {
        let dt = ts.saturating_sub(self.last_ts);
        self.last_ts = self.last_ts.max(ts);
        self.cur.live_byte_ns += live as u128 * dt as u128;
        self.cur.live_max = self.cur.live_max.max(live);
        if let Some(r) = self.rss {
            self.cur.rss_byte_ns += r as u128 * dt as u128;
            self.cur.rss_ns += dt;
        }
    }

    #[cold]
    fn stall(&mut self, ns: u64) {
        self.cur.stalls += 1;
        self.cur.max_stall_ns = self.cur.max_stall_ns.max(ns);
    }

    #[cold]
    fn record(&mut self, e: &Event) {
        match e.op {
            Op::Rss => {
                let v = e.value();
                self.rss = Some(v);
                self.rss_last = Some(v);
                self.cur.rss_max = self.cur.rss_max.max(v);
            }
            Op::Stall if self.stall_records => self.stall(e.backend_ns().unwrap_or(0)),
            Op::AllocStat => self.cur.stat(alloc_stat_name(e.size), e.value() as f64, 1),
            _ => {}
        }
    }

    /// Closes the slices that end at or before `ts` (empty ones too: time passed).
    #[cold]
    fn cross(&mut self, ts: u64, live: u64) {
        while ts >= self.end {
            self.weigh(self.end, live);
            self.close(self.end, live);
        }
    }

    fn close(&mut self, at: u64, live: u64) {
        let mut s = std::mem::take(&mut self.cur);
        s.start_ns = self.start;
        s.dur_ns = at - self.start;
        for (o, h) in self.hist.iter_mut().enumerate() {
            if let Some(h) = h {
                let base = (o * BUCKETS) as u32;
                s.timed.extend(h.take_sparse().into_iter().map(|(b, c)| (base + b, c)));
            }
        }
        s.timed.shrink_to_fit();
        self.done.push(s);
        self.start = at;
        self.cur.live_max = live;
        self.cur.rss_max = self.rss.unwrap_or(0);
        if self.done.len() == MAX_SLICES {
            self.done = halve(std::mem::take(&mut self.done));
            self.width *= 2;
        }
        self.end = self.start + self.width;
    }

    /// The log ended at `end_ns` with `live` bytes live: the open slice closes.
    pub fn finish(&mut self, end_ns: u64, live: u64) {
        self.weigh(end_ns, live);
        if self.last_ts > self.start
            || self.cur.calls + self.cur.stalls > 0
            || !self.cur.stats.is_empty()
            || self.done.is_empty()
        {
            self.close(self.last_ts.max(self.start), live);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(op: Op, ts_ns: u64, backend: Option<u64>, arg: u64) -> Event {
        Event { op, ts_ns, backend: backend.unwrap_or(Event::NOT_TIMED), arg, ..Event::default() }
    }

    /// A 10 s run (thousands of 10 ms slices before the merges): whatever the merges, the
    /// slices add up to the run: its length, calls, timed calls, stalls, live bytes x time
    /// and RSS x time, exactly; and there are 64 to 128 of them.
    #[test]
    fn slices_add_up_to_the_run() {
        let mut s = Slices::new(false);
        let (mut live, mut live_ns, mut rss_ns) = (0u64, 0u128, 0u128);
        let mut last = 0u64;
        let rss = 5_000_000u64;
        s.take(&ev(Op::Rss, 0, None, rss), live);
        let mut calls = 1u64;
        for i in 1..=100_000u64 {
            let ts = i * 100_000; // every 100 us
            live_ns += live as u128 * (ts - last) as u128;
            rss_ns += rss as u128 * (ts - last) as u128;
            last = ts;
            let slow = i % 25_000 == 0;
            s.take(&ev(Op::Malloc, ts, (i % 4 == 0).then_some(if slow { 2_000_000 } else { 40 }), 0), live);
            calls += 1;
            live += 16;
        }
        s.finish(last, live);
        let sum = |f: fn(&Slice) -> u128| s.done.iter().map(f).sum::<u128>();
        assert!((64..=128).contains(&s.done.len()), "{} slices", s.done.len());
        assert_eq!(sum(|x| x.dur_ns as u128), last as u128);
        assert_eq!(sum(|x| x.calls as u128), calls as u128 - 1, "the RSS record is not a call");
        assert_eq!(sum(|x| x.timed.iter().map(|t| t.1 as u128).sum()), 25_000);
        assert_eq!(sum(|x| x.stalls as u128), 4);
        assert_eq!(s.done.iter().map(|x| x.max_stall_ns).max(), Some(2_000_000));
        assert_eq!(sum(|x| x.live_byte_ns), live_ns);
        assert_eq!(sum(|x| x.rss_byte_ns), rss_ns);
        assert_eq!(s.done.iter().map(|x| x.live_max).max(), Some(live));
        // Contiguous, in order.
        for w in s.done.windows(2) {
            assert_eq!(w[0].start_ns + w[0].dur_ns, w[1].start_ns);
        }
        // The malloc histogram holds every timed call, in malloc's range of buckets.
        assert!(s.done.iter().all(|x| x.timed.iter().all(|t| (t.0 as usize) < BUCKETS)));
    }

    #[test]
    fn sparse_histograms_merge() {
        assert_eq!(
            merge_sparse(&[(1, 2), (5, 1)], &[(0, 1), (5, 3), (9, 1)]),
            vec![(0, 1), (1, 2), (5, 4), (9, 1)]
        );
        assert_eq!(merge_sparse(&[], &[(3, 1)]), vec![(3, 1)]);
    }

    /// A watch log's stalls are its stall records, not its (absent) timed calls.
    #[test]
    fn watch_log_stalls_are_records() {
        let mut s = Slices::new(true);
        s.take(&ev(Op::Stall, 1_000, Some(3_000_000), 7), 0);
        s.take(&ev(Op::Malloc, 2_000, Some(5_000_000), 0), 0);
        s.finish(2_000, 0);
        assert_eq!(s.done.iter().map(|x| x.stalls).sum::<u64>(), 1);
        assert_eq!(s.done[0].max_stall_ns, 3_000_000);
    }
}
