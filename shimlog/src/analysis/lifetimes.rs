//! Lifetimes: how long blocks stay alive, how many allocations the process makes while
//! they do, how many die young, and which are never freed.
use super::classes::SizeTable;
use super::fasthist::FastHist;
use super::sizes::Sizes;
use hdrhistogram::Histogram;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Upper bounds (exclusive, ns) of the lifetime buckets: a 1-2-5 series from 100 ns to 10 s;
/// the last bucket is everything from 10 s on.
const LT_BOUNDS: [u64; 25] = [
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];
const NLT: usize = LT_BOUNDS.len() + 1;
/// Allocations-in-between buckets: exact counts below this, then powers of two.
const EXACT: u64 = 16;
const NBT: usize = EXACT as usize + 60;
/// How many sizes of never-freed blocks the report lists.
pub const TOP: usize = 20;

#[derive(Clone)]
pub struct Lifetimes {
    /// Lifetimes in ns (hdrhistogram's buckets, recorded inline; see fasthist).
    ns: FastHist<2>,
    /// Allocations-in-between per bucket (exact below 16, then powers of two), and the most.
    between: [u64; NBT],
    between_max: u64,
    freed: u64,
    within_1us: u64,
    within_1ms: u64,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Lifetimes {
            ns: FastHist::default(),
            between: [0; NBT],
            between_max: 0,
            freed: 0,
            within_1us: 0,
            within_1ms: 0,
        }
    }
}

fn between_bucket(n: u64) -> usize {
    if n < EXACT {
        n as usize
    } else {
        EXACT as usize + (63 - n.leading_zeros() as usize) - 4
    }
}

fn between_range(k: usize) -> (u64, u64) {
    if k < EXACT as usize {
        (k as u64, k as u64)
    } else {
        let lo = 1u64 << (k - EXACT as usize + 4);
        (lo, if lo == 1 << 63 { u64::MAX } else { lo * 2 - 1 })
    }
}

impl Lifetimes {
    /// A block lived `ns` nanoseconds, during which the process made `between` allocations.
    #[inline(always)]
    pub fn record(&mut self, ns: u64, between: u64) {
        self.freed += 1;
        self.within_1us += (ns < 1_000) as u64;
        self.within_1ms += (ns < 1_000_000) as u64;
        self.ns.record(ns);
        self.between[between_bucket(between)] += 1;
        self.between_max = self.between_max.max(between);
    }

    pub fn merge(&mut self, o: &Lifetimes) {
        self.ns.add(&o.ns);
        for k in 0..NBT {
            self.between[k] += o.between[k];
        }
        self.between_max = self.between_max.max(o.between_max);
        self.freed += o.freed;
        self.within_1us += o.within_1us;
        self.within_1ms += o.within_1ms;
    }

    /// `allocated`: successful allocations of the run; `never`: never-freed blocks by size id.
    pub fn report(&self, allocated: u64, never: &NeverFreed, t: &SizeTable) -> LifetimesReport {
        let ns = self.ns.to_hdr();
        let q = |h: &Histogram<u64>, p: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(p)
            }
        };
        // Lifetime buckets come from the histogram, each recorded value counted once at
        // the low end of its histogram bucket (within the histogram's 1%).
        let spread = |h: &Histogram<u64>, n: usize, index: &dyn Fn(u64) -> usize| -> Vec<u64> {
            let mut c = vec![0u64; n];
            for v in h.iter_recorded() {
                c[index(h.lowest_equivalent(v.value_iterated_to()))] += v.count_since_last_iteration();
            }
            c
        };
        let lt = spread(&ns, NLT, &|x| LT_BOUNDS.partition_point(|&b| b <= x));
        let lt_buckets = (0..NLT)
            .filter(|&k| lt[k] > 0)
            .map(|k| LifetimeBucket {
                from_ns: if k == 0 { 0 } else { LT_BOUNDS[k - 1] },
                below_ns: LT_BOUNDS.get(k).copied(),
                blocks: lt[k],
            })
            .collect();
        let bt = &self.between;
        let bt_buckets = (0..NBT)
            .filter(|&k| bt[k] > 0)
            .map(|k| {
                let (from, to) = between_range(k);
                BetweenBucket { from, to, blocks: bt[k] }
            })
            .collect();
        // A quantile of allocations-in-between: the top of the bucket that holds it (exact
        // below 16), never above the largest seen.
        let bq = |p: f64| -> u64 {
            let n: u64 = bt.iter().sum();
            if n == 0 {
                return 0;
            }
            let rank = ((p * n as f64).ceil() as u64).max(1);
            let mut seen = 0;
            for (k, &c) in bt.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return between_range(k).1.min(self.between_max);
                }
            }
            self.between_max
        };
        let mut by_size: Vec<NeverFreedSize> = never
            .by_size
            .iter()
            .map(|(&id, &blocks)| {
                let size = t.size(id);
                NeverFreedSize { size, blocks, bytes: size.saturating_mul(blocks) }
            })
            .collect();
        by_size.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.blocks.cmp(&a.blocks)).then(a.size.cmp(&b.size)));
        by_size.truncate(TOP);
        LifetimesReport {
            freed_blocks: self.freed,
            never_freed_blocks: never.blocks,
            never_freed_bytes: never.bytes,
            freed_within_1us: self.within_1us,
            freed_within_1ms: self.within_1ms,
            share_within_1us: super::slop::ratio(self.within_1us, allocated),
            share_within_1ms: super::slop::ratio(self.within_1ms, allocated),
            p50_ns: q(&ns, 0.5),
            p90_ns: q(&ns, 0.9),
            p99_ns: q(&ns, 0.99),
            max_ns: ns.max(),
            mean_ns: if ns.is_empty() { 0.0 } else { ns.mean() },
            buckets: lt_buckets,
            allocs_between: BetweenReport {
                p50: bq(0.5),
                p90: bq(0.9),
                p99: bq(0.99),
                max: self.between_max,
                buckets: bt_buckets,
            },
            never_freed_by_size: by_size,
        }
    }
}

/// Blocks still live at the end, grouped by size id.
#[derive(Default, Clone)]
pub struct NeverFreed {
    pub blocks: u64,
    pub bytes: u64,
    pub by_size: FxHashMap<u32, u64>,
}

impl NeverFreed {
    /// From the live count of each size at the end.
    pub fn of(s: &Sizes, t: &SizeTable) -> NeverFreed {
        let mut n = NeverFreed::default();
        for (i, st) in s.stats.iter().enumerate() {
            if st.live > 0 {
                n.blocks += st.live;
                n.bytes = n.bytes.saturating_add(st.live.saturating_mul(t.size(i as u32)));
                n.by_size.insert(i as u32, st.live);
            }
        }
        n
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct LifetimesReport {
    pub freed_blocks: u64,
    pub never_freed_blocks: u64,
    pub never_freed_bytes: u64,
    pub freed_within_1us: u64,
    pub freed_within_1ms: u64,
    /// Of all blocks allocated.
    pub share_within_1us: f64,
    pub share_within_1ms: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    /// Freed blocks by time alive: [from_ns, below_ns); the last has no upper bound.
    pub buckets: Vec<LifetimeBucket>,
    /// Allocations the process made while each freed block was alive.
    pub allocs_between: BetweenReport,
    /// Never-freed blocks grouped by size, most bytes first.
    pub never_freed_by_size: Vec<NeverFreedSize>,
}

#[derive(Serialize, Clone, Debug)]
pub struct LifetimeBucket {
    pub from_ns: u64,
    pub below_ns: Option<u64>,
    pub blocks: u64,
}

#[derive(Serialize, Clone, Debug)]
pub struct BetweenReport {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
    /// Exact counts for 0..15, then [2^k, 2^(k+1) - 1]. The quantiles above are the top of
    /// the bucket that holds them.
    pub buckets: Vec<BetweenBucket>,
}

#[derive(Serialize, Clone, Debug)]
pub struct BetweenBucket {
    pub from: u64,
    pub to: u64,
    pub blocks: u64,
}

#[derive(Serialize, Clone, Debug)]
pub struct NeverFreedSize {
    pub size: u64,
    pub blocks: u64,
    pub bytes: u64,
}
