//! The intervals: a bootstrap (docs/compare.md, "Method"). Each replicate draws, for each
//! side independently, its logs with replacement when it has several (each log a unit, taken
//! whole: a process, a window, a host, a run), or the time slices of its one log with
//! replacement; every metric is computed from the draw as from the whole sides (metrics.rs).
//! The interval of a change is the percentile interval of the replicates' log ratios
//! (candidate / base), widened there for few logs, and brought back to the ratio: never below
//! -100% (see [`intervals`]). The generator is seeded (`--seed`), so the same logs give the
//! same output.
use super::metrics::{abs_floor, Acc, Def, Dim, Group, LogSum, Role};
use super::side::Side;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

pub struct Params {
    pub resamples: usize,
    pub seed: u64,
    /// 0.95 for 95% intervals.
    pub confidence: f64,
    /// Overrides every group's floor.
    pub min_change: Option<f64>,
}

#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub name: String,
    pub group: Group,
    pub unit: Dim,
    pub what: &'static str,
    pub base: Option<f64>,
    pub candidate: Option<f64>,
    /// candidate - base.
    pub change: Option<f64>,
    /// candidate / base - 1 (absent when the base is 0).
    pub relative: Option<f64>,
    /// The interval of `change`, and of `relative`.
    pub interval: Option<[f64; 2]>,
    pub relative_interval: Option<[f64; 2]>,
    /// The smallest relative change reported as one.
    pub floor: f64,
    /// The interval excludes 0 (or there is none: one value per log, one log a side) and
    /// the change is at least the floor.
    pub differs: bool,
    /// False for latency and stalls with fewer than JUDGE_LOGS logs a side: shown, never
    /// called a difference (metrics.rs, Def::judged).
    pub judged: bool,
    /// Why the metric is not compared (then no values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_compared: Option<String>,
}

/// A side's logs for one role (its call logs, or its run logs), ready to be drawn from:
/// each log's sums over all its slices, made once.
struct Pool<'a> {
    side: &'a Side,
    logs: Vec<usize>,
    whole: Vec<LogSum>,
    hist: bool,
}

impl<'a> Pool<'a> {
    fn new(side: &'a Side, logs: Vec<usize>, hist: bool) -> Pool<'a> {
        let whole =
            logs.iter().map(|&l| LogSum::of(&side.logs[l], 0..side.logs[l].slices.len(), hist)).collect();
        Pool { side, logs, whole, hist }
    }

    /// One draw (`rng` None: every log and slice once, the point estimate). With several
    /// logs, the logs are what is drawn, each whole: a log's own slices vary less than
    /// its next run would, and that run-to-run spread is in how the logs differ; drawing
    /// their slices as well would count the spread within a run twice (docs/compare.md,
    /// "Method"). With one log, its slices are drawn.
    fn draw(&self, rng: Option<&mut Xoshiro256PlusPlus>) -> Acc {
        let mut acc = Acc::new(self.hist);
        let n = self.logs.len();
        match rng {
            None => self.whole.iter().for_each(|w| acc.add(w)),
            Some(r) if n >= 2 => (0..n).for_each(|_| acc.add(&self.whole[r.random_range(0..n)])),
            Some(r) => {
                for &l in &self.logs {
                    let log = &self.side.logs[l];
                    let k = log.slices.len();
                    let idx: Vec<usize> = (0..k).map(|_| r.random_range(0..k)).collect();
                    acc.add(&LogSum::of(log, idx.into_iter(), self.hist));
                }
            }
        }
        acc.finish();
        acc
    }
}

/// The metrics of one draw of a side (`rng` None: the point estimate).
fn values(
    defs: &[Def],
    calls: &Pool,
    run: &Pool,
    mut rng: Option<&mut Xoshiro256PlusPlus>,
) -> Vec<Option<f64>> {
    let c = calls.draw(rng.as_deref_mut());
    let r = run.draw(rng);
    defs.iter()
        .map(|d| match d.role {
            Role::Calls => c.value(&d.name),
            Role::Run => r.value(&d.name),
        })
        .collect()
}

/// The rows of `defs` for `base` against `cand`; `refused[i]`, why metric i is not compared.
pub fn rows(defs: &[Def], refused: &[Option<String>], base: &Side, cand: &Side, p: &Params) -> Vec<Row> {
    let pools = |s| (Pool::new(s, s.call_logs(), true), Pool::new(s, s.run_logs(), false));
    let (bp, cp) = (pools(base), pools(cand));
    let b0 = values(defs, &bp.0, &bp.1, None);
    let c0 = values(defs, &cp.0, &cp.1, None);
    // Each side's replicates, from a generator of its own (the two sides on two threads:
    // they are drawn independently).
    let replicates = |(calls, run): &(Pool, Pool), seed: u64| -> Vec<Vec<Option<f64>>> {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..p.resamples).map(|_| values(defs, calls, run, Some(&mut r))).collect()
    };
    let (rb, rc) = std::thread::scope(|s| {
        let b = s.spawn(|| replicates(&bp, p.seed));
        let c = replicates(&cp, p.seed ^ 0x9e37_79b9_7f4a_7c15);
        (b.join().expect("bootstrap thread"), c)
    });
    // Replicates, metric by metric: (base, candidate).
    let mut pairs: Vec<Vec<(f64, f64)>> = vec![Vec::with_capacity(p.resamples); defs.len()];
    for (vb, vc) in rb.iter().zip(&rc) {
        for i in 0..defs.len() {
            if let (Some(b), Some(c)) = (vb[i], vc[i]) {
                pairs[i].push((b, c));
            }
        }
    }
    let alpha = 1.0 - p.confidence;
    defs.iter()
        .enumerate()
        .map(|(i, d)| {
            let floor = p.min_change.unwrap_or(d.group.floor());
            let (b, c) = (b0[i], c0[i]);
            let why = refused[i].clone().or_else(|| match (b, c) {
                (None, None) => Some("neither side measures it".into()),
                (None, _) => Some("the base does not measure it".into()),
                (_, None) => Some("the candidate does not measure it".into()),
                _ => None,
            });
            if why.is_some() {
                return Row {
                    name: d.name.clone(),
                    group: d.group,
                    unit: d.dim,
                    what: d.what,
                    base: b,
                    candidate: c,
                    change: None,
                    relative: None,
                    interval: None,
                    relative_interval: None,
                    floor,
                    differs: false,
                    judged: false,
                    not_compared: why,
                };
            }
            let (b, c) = (b.unwrap_or(0.0), c.unwrap_or(0.0));
            // One value per log, and one log a side: nothing to draw from, no interval.
            let drawn = !d.per_log || units(base, d.role) > 1 || units(cand, d.role) > 1;
            let wide = small_sample_widening(units(base, d.role), units(cand, d.role), alpha);
            let (interval, relative_interval) =
                if drawn { intervals(b, c, &pairs[i], alpha, wide) } else { (None, None) };
            let relative = (b != 0.0).then(|| c / b - 1.0);
            let beyond_noise = match interval {
                Some([lo, hi]) => lo > 0.0 || hi < 0.0,
                None => !drawn,
            };
            let big_enough = (c - b).abs() >= abs_floor(d.dim)
                && match relative {
                    Some(r) => r.abs() >= floor,
                    None => c != 0.0,
                };
            let judged = d.judged(
                units(base, d.role).min(units(cand, d.role)),
                shortest(base, d.role).min(shortest(cand, d.role)),
            );
            Row {
                name: d.name.clone(),
                group: d.group,
                unit: d.dim,
                what: d.what,
                base: Some(b),
                candidate: Some(c),
                change: Some(c - b),
                relative,
                interval,
                relative_interval,
                floor,
                differs: judged && beyond_noise && big_enough,
                judged,
                not_compared: None,
            }
        })
        .collect()
}

/// How many logs a side computes `role`'s metrics from.
fn units(s: &Side, role: Role) -> usize {
    match role {
        Role::Calls => s.call_logs().len(),
        Role::Run => s.run_logs().len(),
    }
}

/// The length of the shortest of the logs a side computes `role`'s metrics from.
fn shortest(s: &Side, role: Role) -> u64 {
    let logs = match role {
        Role::Calls => s.call_logs(),
        Role::Run => s.run_logs(),
    };
    logs.iter().map(|&i| s.logs[i].slices.iter().map(|x| x.dur_ns).sum::<u64>()).min().unwrap_or(0)
}

/// How much wider an interval drawn from `nb` and `nc` logs a side must be than the
/// bootstrap's percentiles (applied on the log of the ratio: [`intervals`]). Resampling n
/// logs sees (n - 1) / n of their variance, and the
/// spread between runs is known only from the few runs there are: Student's t with
/// nb + nc - 2 degrees of freedom in place of the normal quantile, the usual small-sample
/// correction. 2 logs a side: 3.1x at 95%; 5: 1.32x; 20: 1.06x; one log a side: 1 (its
/// slices are what is drawn, and nothing from one log is judged but latency's 5-log rule).
pub fn small_sample_widening(nb: usize, nc: usize, alpha: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal, StudentsT};
    // The fewer side's logs, or the other's when one side is a single log (only the other
    // is drawn from).
    let n = if nb.min(nc) >= 2 { nb.min(nc) } else { nb.max(nc) };
    let df = (nb + nc).saturating_sub(2);
    if n < 2 || df == 0 {
        return 1.0;
    }
    let q = 1.0 - alpha / 2.0;
    let t = StudentsT::new(0.0, 1.0, df as f64).map(|d| d.inverse_cdf(q));
    let z = Normal::standard().inverse_cdf(q);
    match t {
        Ok(t) if t.is_finite() && z > 0.0 => (t / z) * (n as f64 / (n as f64 - 1.0)).sqrt(),
        _ => 1.0,
    }
}

/// The intervals of the change (candidate - base) and of the relative change (candidate /
/// base - 1), from the replicates' (base, candidate) pairs, widened by `k` for few logs.
///
/// Every metric is a time, a size, a rate, a count or a ratio of them: never negative, and
/// its changes multiply. So when both values and every replicate's are above 0, the interval
/// is taken on the log of the ratio (where a ratio's uncertainty is symmetric about no
/// change: a halving as far as a doubling), widened there, and brought back: the ratio's
/// interval, never below -100%, and the change's is the base times it. Otherwise (a count
/// of stalls that is 0 in some draws) on the difference, with its low end held at -base
/// (the candidate cannot be below 0).
pub fn intervals(
    b: f64,
    c: f64,
    pairs: &[(f64, f64)],
    alpha: f64,
    k: f64,
) -> (Option<[f64; 2]>, Option<[f64; 2]>) {
    let positive = b > 0.0 && c > 0.0 && pairs.iter().all(|&(x, y)| x > 0.0 && y > 0.0);
    if positive {
        let mut logs: Vec<f64> = pairs.iter().map(|&(x, y)| (y / x).ln()).collect();
        let Some(v) = percentiles(&mut logs, alpha) else { return (None, None) };
        let [lo, hi] = widen(v, (c / b).ln(), k);
        let rel = [lo.exp() - 1.0, hi.exp() - 1.0];
        return (Some([b * rel[0], b * rel[1]]), Some(rel));
    }
    let mut diffs: Vec<f64> = pairs.iter().map(|&(x, y)| y - x).collect();
    let Some(v) = percentiles(&mut diffs, alpha) else { return (None, None) };
    let [lo, hi] = widen(v, c - b, k);
    let abs = [lo.max(-b), hi.max(-b)];
    let rel = (b > 0.0).then(|| [abs[0] / b, abs[1] / b]);
    (Some(abs), rel)
}

/// `v` stretched by `k` about `at` (the point estimate).
fn widen([lo, hi]: [f64; 2], at: f64, k: f64) -> [f64; 2] {
    [at - (at - lo).max(0.0) * k, at + (hi - at).max(0.0) * k]
}

/// The (alpha/2, 1 - alpha/2) percentiles of `v` (None when empty).
fn percentiles(v: &mut [f64], alpha: f64) -> Option<[f64; 2]> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)];
    Some([at(alpha / 2.0), at(1.0 - alpha / 2.0)])
}

#[cfg(test)]
mod tests {
    use super::small_sample_widening as w;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the replicates (zeros among them, ratios of a thousand either way) and
        /// however much the interval is widened, neither interval says the candidate fell
        /// below 0: the relative one never below -100%.
        #[test]
        fn never_below_minus_100_percent(
            b in 0.0f64..1e9,
            c in 0.0f64..1e9,
            pairs in proptest::collection::vec((0.0f64..1e9, 0.0f64..1e9), 1..200),
            k in 1.0f64..10.0,
        ) {
            let (abs, rel) = super::intervals(b, c, &pairs, 0.05, k);
            let [lo, hi] = abs.expect("an interval from replicates");
            prop_assert!(lo >= -b && lo <= hi, "{lo} .. {hi} (base {b})");
            if let Some([lo, hi]) = rel {
                prop_assert!(lo >= -1.0 && lo <= hi, "{lo} .. {hi}");
            }
        }
    }

    #[test]
    fn widening_follows_students_t() {
        // t(2 df, 0.975) = 4.303, z = 1.960: 4.303 / 1.960 * sqrt(2) = 3.105.
        assert!((w(2, 2, 0.05) - 3.105).abs() < 0.01, "{}", w(2, 2, 0.05));
        // t(8 df) = 2.306: 2.306 / 1.960 * sqrt(5 / 4) = 1.315.
        assert!((w(5, 5, 0.05) - 1.315).abs() < 0.01, "{}", w(5, 5, 0.05));
        assert!((w(20, 20, 0.05) - 1.06).abs() < 0.01, "{}", w(20, 20, 0.05));
        assert_eq!(w(1, 1, 0.05), 1.0);
        // One log against three: the three are drawn from, t with 2 df.
        assert!((w(1, 3, 0.05) - 4.303 / 1.960 * (1.5f64).sqrt()).abs() < 0.01, "{}", w(1, 3, 0.05));
    }
}
