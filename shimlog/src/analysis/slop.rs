//! Size-class waste ("slop"): the bytes each backend would lose by rounding every request up
//! to its size class, per class, summed over the run and at the moment of peak live bytes
//! (as in Firefox's jemalloc size-class work, bug 1669392).
//!
//! Derived at the end from the per-size counts ([`Sizes`]): a size's class in each backend
//! is asked of the backend itself ([`SizeTable::classes`]), once per distinct size.
use super::classes::SizeTable;
use super::sizes::Sizes;
use serde::Serialize;
use shim_backend::Backend;
use std::collections::BTreeMap;

/// `made`: blocks made per size over the run; `peak`: blocks live per size at the peak of
/// `peak_live` bytes (the same for one process; the total's own tracker for several).
pub fn report(
    t: &mut SizeTable,
    made: &Sizes,
    peak: &Sizes,
    peak_live: u64,
) -> BTreeMap<&'static str, BackendSlop> {
    let n = made.stats.len().max(peak.stats.len());
    let get = |s: &Sizes, i: usize| s.stats.get(i).copied().unwrap_or_default();
    let mut rows: Vec<BTreeMap<u64, ClassRow>> = vec![BTreeMap::new(); Backend::ALL.len()];
    let mut requested = 0u64;
    for i in 0..n {
        let (m, p) = (get(made, i).made, get(peak, i).at_peak);
        if m == 0 && p == 0 {
            continue;
        }
        let size = t.size(i as u32);
        requested = requested.saturating_add(m.saturating_mul(size));
        let c = t.classes(i as u32);
        for (b, rows) in rows.iter_mut().enumerate() {
            let class = t.classes[b].sizes[c.class[b] as usize];
            let r = rows.entry(class).or_insert(ClassRow { class_bytes: class, ..Default::default() });
            r.allocations += m;
            r.slop_bytes = r.slop_bytes.saturating_add(m.saturating_mul(c.slop[b]));
            r.blocks_at_peak += p;
            r.slop_at_peak_bytes = r.slop_at_peak_bytes.saturating_add(p.saturating_mul(c.slop[b]));
        }
    }
    Backend::ALL
        .iter()
        .zip(rows)
        .map(|(be, rows)| {
            let classes: Vec<ClassRow> = rows.into_values().collect();
            let slop: u64 = classes.iter().map(|c| c.slop_bytes).sum();
            let at_peak: u64 = classes.iter().map(|c| c.slop_at_peak_bytes).sum();
            let r = BackendSlop {
                backend: be.name(),
                version: be.version(),
                requested_bytes: requested,
                slop_bytes: slop,
                slop_share: ratio(slop, requested),
                at_peak: AtPeak {
                    live_bytes: peak_live,
                    slop_bytes: at_peak,
                    slop_share: ratio(at_peak, peak_live),
                },
                classes,
            };
            (be.name(), r)
        })
        .collect()
}

pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct BackendSlop {
    pub backend: &'static str,
    /// The version of the backend built into this shimlog, whose classes these are.
    pub version: String,
    /// Bytes requested by the successful allocations of the run.
    pub requested_bytes: u64,
    /// Sum over the run of (class - requested) of every allocation.
    pub slop_bytes: u64,
    pub slop_share: f64,
    pub at_peak: AtPeak,
    /// Every class used, by class size.
    pub classes: Vec<ClassRow>,
}

#[derive(Serialize, Clone, Debug)]
pub struct AtPeak {
    pub live_bytes: u64,
    pub slop_bytes: u64,
    /// slop / live bytes at the peak.
    pub slop_share: f64,
}

#[derive(Serialize, Clone, Debug, Default)]
pub struct ClassRow {
    pub class_bytes: u64,
    pub allocations: u64,
    pub slop_bytes: u64,
    pub blocks_at_peak: u64,
    pub slop_at_peak_bytes: u64,
}
