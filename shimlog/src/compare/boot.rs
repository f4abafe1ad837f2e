//! The intervals: a bootstrap over time slices (docs/compare.md, "Method"). Each replicate
//! draws, for each side independently, its logs with replacement when it has several (each
//! log a unit: a process, a window, a host), then within each drawn log as many of its time
//! slices as it has, with replacement; every metric is computed from the draw as from the
//! whole sides (metrics.rs). The interval of a difference is the percentile interval of the
//! replicates' differences (candidate - base, and candidate / base - 1). The generator is
//! seeded (`--seed`), so the same logs give the same output.
use super::metrics::{abs_floor, Acc, Def, Dim, Group, Role};
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

/// One draw of a side: the accumulations of its call logs (with the latency histogram)
/// and of its run logs. `rng` None: every log and slice once (the point estimate).
fn draw(side: &Side, rng: &mut Option<Xoshiro256PlusPlus>) -> (Acc, Acc) {
    let one = |logs: Vec<usize>, hist: bool, rng: &mut Option<Xoshiro256PlusPlus>| {
        let mut acc = Acc::new(hist);
        let n = logs.len();
        let chosen: Vec<usize> = match rng {
            Some(r) if n >= 2 => (0..n).map(|_| logs[r.random_range(0..n)]).collect(),
            _ => logs,
        };
        for l in chosen {
            let log = &side.logs[l];
            let k = log.slices.len();
            let idx: Vec<usize> = match rng {
                Some(r) if k > 0 => (0..k).map(|_| r.random_range(0..k)).collect(),
                _ => (0..k).collect(),
            };
            acc.add_log(log, idx.into_iter());
        }
        acc.finish();
        acc
    };
    let calls = one(side.call_logs(), true, rng);
    let run = one(side.run_logs(), false, rng);
    (calls, run)
}

fn values(defs: &[Def], (calls, run): &(Acc, Acc)) -> Vec<Option<f64>> {
    defs.iter()
        .map(|d| match d.role {
            Role::Calls => calls.value(&d.name),
            Role::Run => run.value(&d.name),
        })
        .collect()
}

/// The rows of `defs` for `base` against `cand`; `refused[i]`, why metric i is not compared.
pub fn rows(defs: &[Def], refused: &[Option<String>], base: &Side, cand: &Side, p: &Params) -> Vec<Row> {
    let b0 = values(defs, &draw(base, &mut None));
    let c0 = values(defs, &draw(cand, &mut None));
    // Each side's replicates, from a generator of its own (the two sides on two threads:
    // they are drawn independently).
    let replicates = |side: &Side, seed: u64| -> Vec<Vec<Option<f64>>> {
        let mut r = Some(Xoshiro256PlusPlus::seed_from_u64(seed));
        (0..p.resamples).map(|_| values(defs, &draw(side, &mut r))).collect()
    };
    let (rb, rc) = std::thread::scope(|s| {
        let b = s.spawn(|| replicates(base, p.seed));
        let c = replicates(cand, p.seed ^ 0x9e37_79b9_7f4a_7c15);
        (b.join().expect("bootstrap thread"), c)
    });
    // Replicates, metric by metric: (candidate - base, candidate / base - 1).
    let mut diffs: Vec<Vec<f64>> = vec![Vec::with_capacity(p.resamples); defs.len()];
    let mut rels: Vec<Vec<f64>> = vec![Vec::with_capacity(p.resamples); defs.len()];
    for (vb, vc) in rb.iter().zip(&rc) {
        for i in 0..defs.len() {
            if let (Some(b), Some(c)) = (vb[i], vc[i]) {
                diffs[i].push(c - b);
                if b != 0.0 {
                    rels[i].push(c / b - 1.0);
                }
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
            let interval =
                if drawn { percentiles(&mut diffs[i], alpha).map(|v| widen(v, c - b, wide)) } else { None };
            let relative = (b != 0.0).then(|| c / b - 1.0);
            let relative_interval = if b != 0.0 && drawn {
                percentiles(&mut rels[i], alpha).map(|v| widen(v, c / b - 1.0, wide))
            } else {
                None
            };
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

/// The (alpha/2, 1 - alpha/2) percentiles of `v` (None when empty).
/// How much wider an interval drawn from `nb` and `nc` logs a side must be than the
/// bootstrap's percentiles. Resampling n logs sees (n - 1) / n of their variance, and the
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

/// `v` stretched by `k` about `at` (the point estimate).
fn widen([lo, hi]: [f64; 2], at: f64, k: f64) -> [f64; 2] {
    [at - (at - lo).max(0.0) * k, at + (hi - at).max(0.0) * k]
}

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
