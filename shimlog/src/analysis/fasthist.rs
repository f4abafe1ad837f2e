//! A histogram recorded in a few instructions, inline, for the values the analysis records
//! at nearly every event (block lifetimes, backend times). Its buckets are exactly those of
//! an `hdrhistogram::Histogram` of `DIGITS` significant digits, so [`FastHist::to_hdr`]
//! gives the same histogram as recording every value there would (same counts, quantiles,
//! mean and max), and the report is built from that.
use hdrhistogram::Histogram;

#[derive(Clone)]
pub struct FastHist<const DIGITS: u8> {
    counts: Box<[u64]>,
}

impl<const DIGITS: u8> Default for FastHist<DIGITS> {
    fn default() -> Self {
        FastHist { counts: vec![0u64; Self::LEN].into_boxed_slice() }
    }
}

impl<const DIGITS: u8> FastHist<DIGITS> {
    /// hdrhistogram's layout for DIGITS significant digits and a lowest unit of 1:
    /// 2^(HALF_MAG + 1) sub-buckets, the upper half of them used in every bucket after the
    /// first.
    const HALF_MAG: u32 = match DIGITS {
        2 => 7,
        3 => 10,
        _ => panic!("FastHist: 2 or 3 significant digits"),
    };
    const SUB_MASK: u64 = (1 << (Self::HALF_MAG + 1)) - 1;
    const LZ_BASE: u32 = 64 - Self::HALF_MAG - 1;
    /// Buckets up to values of 2^64 - 1.
    pub const LEN: usize = ((Self::LZ_BASE as usize) << Self::HALF_MAG) + (1 << (Self::HALF_MAG + 1));

    /// The index of `v`'s bucket, as hdrhistogram computes it.
    #[inline(always)]
    fn index(v: u64) -> usize {
        let b = Self::LZ_BASE - (v | Self::SUB_MASK).leading_zeros();
        let sub = (v >> b) as usize;
        ((b as usize + 1) << Self::HALF_MAG) + sub - (1 << Self::HALF_MAG)
    }

    /// The lowest value of bucket `i`.
    pub fn lowest(i: usize) -> u64 {
        if i < 1 << (Self::HALF_MAG + 1) {
            return i as u64;
        }
        let b = (i >> Self::HALF_MAG) - 1;
        let sub = (i & ((1 << Self::HALF_MAG) - 1)) + (1 << Self::HALF_MAG);
        (sub as u64) << b
    }

    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        let i = Self::index(v).min(Self::LEN - 1);
        self.counts[i] += 1;
    }

    /// Starts loading the count that recording `v` will increment.
    #[inline(always)]
    pub fn prefetch(&self, v: u64) {
        recorder::cpu::prefetch(self.counts.as_ptr().wrapping_add(Self::index(v).min(Self::LEN - 1)));
    }

    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&c| c == 0)
    }

    /// The nonzero counts as (bucket, count), by bucket, and the histogram emptied (a time
    /// slice's, for `compare`: see slices.rs).
    pub fn take_sparse(&mut self) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        for (i, c) in self.counts.iter_mut().enumerate() {
            if *c > 0 {
                out.push((i as u32, std::mem::take(c)));
            }
        }
        out
    }

    pub fn add(&mut self, o: &FastHist<DIGITS>) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
    }

    /// The same values in an hdrhistogram (each bucket's count recorded at its lowest value).
    pub fn to_hdr(&self) -> Histogram<u64> {
        let mut h = Histogram::new(DIGITS).expect("histogram");
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 {
                let _ = h.record_n(Self::lowest(i), c);
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn agrees<const D: u8>(vals: &[u64]) -> Result<(), TestCaseError> {
        let mut f = FastHist::<D>::default();
        let mut h = Histogram::<u64>::new(D).unwrap();
        for &v in vals {
            f.record(v);
            h.record(v).unwrap();
            prop_assert_eq!(FastHist::<D>::lowest(FastHist::<D>::index(v)), h.lowest_equivalent(v));
        }
        let g = f.to_hdr();
        prop_assert_eq!(g.len(), h.len());
        prop_assert_eq!(g.max(), h.max());
        prop_assert_eq!(g.min(), h.min());
        prop_assert_eq!(g.mean(), h.mean());
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
            prop_assert_eq!(g.value_at_quantile(q), h.value_at_quantile(q));
        }
        let a: Vec<(u64, u64)> =
            g.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
        let b: Vec<(u64, u64)> =
            h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
        prop_assert_eq!(a, b);
        Ok(())
    }

    proptest! {
        /// Recording here and converting gives what recording into hdrhistogram gives, for
        /// both precisions the analysis uses.
        #[test]
        fn same_as_hdrhistogram(vals in prop::collection::vec(
            prop_oneof![0u64..300, 0u64..5000, 0u64..1 << 20, 0u64..1 << 40, any::<u64>()], 1..400)) {
            agrees::<2>(&vals)?;
            agrees::<3>(&vals)?;
        }
    }
}
