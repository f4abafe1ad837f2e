//! A histogram recorded in a few instructions, inline, for the one value the analysis
//! records at nearly every free (the block's lifetime). Its buckets are exactly those of an
//! `hdrhistogram::Histogram` of two significant digits, so [`FastHist::to_hdr`] gives the
//! same histogram as recording every value there would (same counts, quantiles, mean and
//! max), and the report is built from that.
use hdrhistogram::Histogram;

/// hdrhistogram's layout for 2 significant digits and a lowest unit of 1: 256 sub-buckets,
/// the upper 128 of them used in every bucket after the first.
const HALF_MAG: u32 = 7;
const SUB_MASK: u64 = 255;
const LZ_BASE: u32 = 64 - HALF_MAG - 1;
/// Buckets up to values of 2^64 - 1.
const LEN: usize = ((LZ_BASE as usize) << HALF_MAG) + 256;

#[derive(Clone)]
pub struct FastHist {
    counts: Box<[u64; LEN]>,
}

impl Default for FastHist {
    fn default() -> Self {
        FastHist {
            counts: vec![0u64; LEN].into_boxed_slice().try_into().expect("LEN counts"),
        }
    }
}

/// The index of `v`'s bucket, as hdrhistogram computes it.
#[inline(always)]
fn index(v: u64) -> usize {
    let b = LZ_BASE - (v | SUB_MASK).leading_zeros();
    let sub = (v >> b) as usize;
    ((b as usize + 1) << HALF_MAG) + sub - (1 << HALF_MAG)
}

/// The lowest value of bucket `i`.
fn lowest(i: usize) -> u64 {
    if i < 256 {
        return i as u64;
    }
    let b = (i >> HALF_MAG) - 1;
    let sub = (i & ((1 << HALF_MAG) - 1)) + (1 << HALF_MAG);
    (sub as u64) << b
}

impl FastHist {
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        self.counts[index(v).min(LEN - 1)] += 1;
    }

    pub fn add(&mut self, o: &FastHist) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
    }

    /// The same values in an hdrhistogram (each bucket's count recorded at its lowest value).
    pub fn to_hdr(&self) -> Histogram<u64> {
        let mut h = Histogram::new(2).expect("histogram");
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 {
                let _ = h.record_n(lowest(i), c);
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Recording here and converting gives what recording into hdrhistogram gives.
        #[test]
        fn same_as_hdrhistogram(vals in prop::collection::vec(
            prop_oneof![0u64..300, 0u64..1 << 20, 0u64..1 << 40, any::<u64>()], 1..400)) {
            let mut f = FastHist::default();
            let mut h = Histogram::<u64>::new(2).unwrap();
            for &v in &vals {
                f.record(v);
                h.record(v).unwrap();
                prop_assert_eq!(lowest(index(v)), h.lowest_equivalent(v));
            }
            let g = f.to_hdr();
            prop_assert_eq!(g.len(), h.len());
            prop_assert_eq!(g.max(), h.max());
            prop_assert_eq!(g.min(), h.min());
            prop_assert_eq!(g.mean(), h.mean());
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
                prop_assert_eq!(g.value_at_quantile(q), h.value_at_quantile(q));
            }
            let a: Vec<(u64, u64)> = g.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
            let b: Vec<(u64, u64)> = h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
            prop_assert_eq!(a, b);
        }
    }
}
