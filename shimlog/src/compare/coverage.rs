//! Does the stated confidence hold? Pairs of simulated sides of one configuration, fed to
//! the real interval code (boot::rows) as `compare` feeds it: logs of time slices.
use super::boot::{rows, Params, Row};
use super::metrics::{fixed, Def};
use super::side::{Kind, Log, Side};
use crate::analysis::{bucket_value, Slice, BUCKETS};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// How the simulated runs vary: each run's level is the configuration's times
/// exp(run x N(0,1)); each slice's, the run's times exp(slice x N(0,1)).
#[derive(Clone, Copy)]
struct Spread {
    run: f64,
    slice: f64,
}

const SLICES: usize = 64;
const SLICE_NS: u64 = 40_000_000;

fn normal(r: &mut Xoshiro256PlusPlus) -> f64 {
    let u1: f64 = 1.0 - r.random::<f64>();
    let u2: f64 = r.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The bucket of a time in the slices' histograms (of op 0, malloc).
fn bucket(v: u64) -> u32 {
    // bucket_value is increasing: the last bucket whose lowest value is <= v.
    let (mut lo, mut hi) = (0usize, BUCKETS - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if bucket_value(mid as u32) <= v {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo as u32
}

/// One run: `factor` times the configuration's levels; `timed_calls` a slice (about 120 ns
/// each).
fn run(r: &mut Xoshiro256PlusPlus, factor: f64, s: Spread, timed_calls: usize) -> Log {
    let lvl = |r: &mut Xoshiro256PlusPlus| factor * (s.run * normal(r)).exp();
    let (mem, rate, lat) = (lvl(r), lvl(r), lvl(r));
    let mut slices = Vec::with_capacity(SLICES);
    for i in 0..SLICES {
        let n = |r: &mut Xoshiro256PlusPlus| (s.slice * normal(r) - s.slice * s.slice / 2.0).exp();
        let live = 64e6 * mem * n(r);
        let rss = 1.3 * live;
        let calls = (25_000.0 * rate * n(r)).round() as u64;
        let mut timed: Vec<(u32, u64)> = Vec::new();
        for _ in 0..timed_calls {
            let t = (120.0 * lat * (0.5 * normal(r)).exp()).round() as u64;
            let b = bucket(t);
            match timed.iter_mut().find(|x| x.0 == b) {
                Some(x) => x.1 += 1,
                None => timed.push((b, 1)),
            }
        }
        timed.sort();
        slices.push(Slice {
            start_ns: i as u64 * SLICE_NS,
            dur_ns: SLICE_NS,
            calls,
            timed,
            rss_byte_ns: (rss * SLICE_NS as f64) as u128,
            rss_ns: SLICE_NS,
            rss_max: (rss * 1.02) as u64,
            live_byte_ns: (live * SLICE_NS as f64) as u128,
            live_max: (live * 1.02) as u64,
            ..Slice::default()
        });
    }
    Log {
        exe: "sim".into(),
        name: "sim".into(),
        backend: "glibc".into(),
        kind: Kind::Full,
        slices,
        rss_end: None,
        slop_share: None,
        memory: Vec::new(),
        folded: None,
    }
}

fn side(r: &mut Xoshiro256PlusPlus, n: usize, factor: f64, s: Spread) -> Side {
    Side { logs: (0..n).map(|_| run(r, factor, s, 0)).collect(), sites: None, sites_estimated: false }
}

const METRICS: [&str; 5] = ["live_mean", "rss_mean", "live_peak", "rss_peak", "calls_per_s"];

/// Per metric: pairs whose interval holds 0, pairs found different.
fn pairs(
    count: usize,
    logs: usize,
    change: f64,
    s: Spread,
    resamples: usize,
    seed: u64,
) -> Vec<(usize, usize)> {
    let defs: Vec<Def> = METRICS.iter().map(|m| fixed(m).expect("metric")).collect();
    let refused = vec![None; defs.len()];
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut out = vec![(0, 0); defs.len()];
    for k in 0..count {
        let b = side(&mut r, logs, 1.0, s);
        let c = side(&mut r, logs, 1.0 + change, s);
        let p = Params { resamples, seed: k as u64 + 1, confidence: 0.95, min_change: None };
        let rs: Vec<Row> = rows(&defs, &refused, &b, &c, &p);
        for (i, row) in rs.iter().enumerate() {
            let [lo, hi] = row.relative_interval.expect("interval");
            if lo <= 0.0 && hi >= 0.0 {
                out[i].0 += 1;
            }
            if row.differs {
                out[i].1 += 1;
            }
        }
    }
    out
}

/// The run-to-run spread of the simulated runs: 6% (log-sd) between runs, 30% between the
/// slices of a run (its 64 slices' mean: 3.75%), about what two runs of one configuration
/// of the bench workloads show for RSS (docs/compare.md, "Does the 95% hold?").
const SPREAD: Spread = Spread { run: 0.06, slice: 0.3 };

fn pct(k: usize, n: usize) -> f64 {
    k as f64 * 100.0 / n as f64
}

#[test]
fn no_change_is_covered_95_percent_of_the_time() {
    // 1000 pairs: a true 95% gives 93-97% but once in 300 seeds (binomial sd 0.7%).
    let n = 1000;
    let t = std::time::Instant::now();
    let same = pairs(n, 5, 0.0, SPREAD, 1000, 7);
    for (i, m) in METRICS.iter().enumerate() {
        let (cover, flagged) = (pct(same[i].0, n), pct(same[i].1, n));
        eprintln!("5 logs a side, no change: {m:12} interval holds 0 in {cover:.1}% of {n} pairs, flagged {flagged:.1}%");
        assert!(
            (93.0..=97.0).contains(&cover),
            "{m}: the 95% interval held no change in {cover:.1}% of {n} pairs"
        );
    }
    eprintln!("{n} pairs in {:.1} s", t.elapsed().as_secs_f64());
}

#[test]
fn a_20_percent_change_is_found_from_5_runs_a_side() {
    let n = 300;
    let up = pairs(n, 5, 0.2, SPREAD, 1000, 8);
    for (i, m) in METRICS.iter().enumerate() {
        let found = pct(up[i].1, n);
        eprintln!("5 logs a side, +20%: {m:12} found in {found:.1}% of {n} pairs");
        // The peaks are the highest slice of each run: with 30% between slices, that
        // highest one scatters more than the run's level (found in about 45%); not held to
        // 90% here, their interval's coverage is.
        if !m.ends_with("_peak") {
            assert!(found >= 90.0, "{m}: +20% found in {found:.1}% of {n} pairs");
        }
    }
}

/// What fewer runs a side give (docs/compare.md, measured on 1000 pairs: 93.1-94.7% with two,
/// 94.6-96.2% with three): held here on 400 pairs (`--nocapture` prints the table).
#[test]
fn fewer_runs_a_side() {
    for logs in [2usize, 3] {
        let n = 400;
        let same = pairs(n, logs, 0.0, SPREAD, 1000, 7);
        let up = pairs(n, logs, 0.2, SPREAD, 1000, 8);
        for (i, m) in METRICS.iter().enumerate() {
            eprintln!(
                "{logs} logs a side {m:12} holds 0: {:5.1}%, flagged {:4.1}%; +20% found: {:5.1}%",
                pct(same[i].0, n),
                pct(same[i].1, n),
                pct(up[i].1, n)
            );
            let held = pct(same[i].0, n);
            assert!(
                (91.0..=98.0).contains(&held),
                "{m}, {logs} logs a side: no change held in {held:.1}% of {n} pairs"
            );
        }
    }
}

/// The intervals: a candidate whose two runs are far apart (a tenth of the base and
/// nine tenths), widened by Student's t for two logs a side. On the percent scale the low
/// end fell below -100%; on the ratio's it cannot.
#[test]
fn no_interval_falls_below_minus_100_percent() {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(3);
    let quiet = Spread { run: 0.0, slice: 0.05 };
    let mk = |r: &mut Xoshiro256PlusPlus, f: &[f64]| Side {
        logs: f.iter().map(|&x| run(r, x, quiet, 32)).collect(),
        sites: None,
        sites_estimated: false,
    };
    let defs: Vec<Def> =
        METRICS.iter().chain(&["alloc_p50", "alloc_p99"]).map(|m| fixed(m).expect("metric")).collect();
    let refused = vec![None; defs.len()];
    for cand in [&[0.1, 0.9][..], &[0.001, 1.0], &[0.01, 0.02, 3.0], &[0.05]] {
        let b = mk(&mut r, &[1.0, 1.0]);
        let c = mk(&mut r, cand);
        let p = Params { resamples: 200, seed: 1, confidence: 0.99, min_change: None };
        for row in rows(&defs, &refused, &b, &c, &p) {
            let [lo, hi] = row.relative_interval.expect("interval");
            let [alo, _] = row.interval.expect("interval");
            assert!(lo >= -1.0 && lo <= hi, "{} {cand:?}: {lo} .. {hi}", row.name);
            assert!(alo >= -row.base.expect("base"), "{} {cand:?}: {alo}", row.name);
        }
    }
}
