//! `--rounds N`: every column replayed N times (in rotated order), each figure of merit as
//! its median with the range of the rounds; the ranking calls two columns tied when their
//! ranges overlap, and the verdict names the best column for allocator time, peak RSS and
//! mean RSS, what each costs in the others, and the ties.
use super::results::Replay;
pub use super::results::{Best, Ranking, Rounds, Spread, Verdict};
use super::units::{bytes, duration};

/// The figures the rounds summarise, lower is better for each.
pub const METRICS: [(&str, &str); 6] = [
    ("alloc_ns", "time in allocator"),
    ("wall_ns", "wall time"),
    ("cpu_ns", "cpu time"),
    ("peak_rss_bytes", "peak RSS"),
    ("mean_rss_bytes", "mean RSS"),
    ("end_rss_bytes", "RSS at end"),
];
/// The three the verdict decides on.
pub const DECIDING: [&str; 3] = ["alloc_ns", "peak_rss_bytes", "mean_rss_bytes"];

/// The resident set over the replay, averaged over time (the samples are evenly spaced).
pub fn mean_rss(r: &Replay) -> u64 {
    let s = &r.memory.samples;
    if s.is_empty() {
        return r.memory.end_rss_bytes;
    }
    (s.iter().map(|x| x.rss_bytes as u128).sum::<u128>() / s.len() as u128) as u64
}

pub fn metric(r: &Replay, m: &str) -> f64 {
    match m {
        "alloc_ns" => r.alloc_ns_total as f64,
        "wall_ns" => r.wall_ns as f64,
        "cpu_ns" => (r.cpu_user_ns + r.cpu_sys_ns) as f64,
        "peak_rss_bytes" => r.memory.peak_rss_bytes as f64,
        "mean_rss_bytes" => mean_rss(r) as f64,
        "end_rss_bytes" => r.memory.end_rss_bytes as f64,
        _ => f64::NAN,
    }
}

/// A column's rounds from its replays.
pub fn of(rs: &[Replay]) -> Rounds {
    let mut metrics = std::collections::BTreeMap::new();
    for (m, _) in METRICS {
        metrics.insert(m.to_string(), Spread::of(rs.iter().map(|r| metric(r, m)).collect()));
    }
    let mut idx: Vec<usize> = (0..rs.len()).collect();
    idx.sort_by(|&a, &b| metric(&rs[a], "alloc_ns").total_cmp(&metric(&rs[b], "alloc_ns")));
    Rounds {
        n: rs.len(),
        metrics,
        median_round: idx.get(rs.len().saturating_sub(1) / 2).copied().unwrap_or(0),
    }
}

fn label(m: &str) -> &'static str {
    METRICS.iter().find(|(k, _)| *k == m).map(|(_, l)| *l).unwrap_or("?")
}

fn show(m: &str, v: f64) -> String {
    if m.ends_with("_ns") {
        duration(v)
    } else {
        bytes(v)
    }
}

/// Ranks the columns (label, rounds) that have results.
pub fn verdict(cols: &[(String, Rounds)]) -> Verdict {
    let n = cols.iter().map(|(_, r)| r.n).min().unwrap_or(0);
    let mut v = Verdict { rounds: n, ..Verdict::default() };
    if cols.is_empty() {
        return v;
    }
    let get = |i: usize, m: &str| cols[i].1.metrics.get(m).cloned().unwrap_or_default();
    for (m, _) in METRICS {
        let mut idx: Vec<usize> = (0..cols.len()).collect();
        idx.sort_by(|&a, &b| get(a, m).median.total_cmp(&get(b, m).median));
        let mut ties = Vec::new();
        for (x, &a) in idx.iter().enumerate() {
            for &b in &idx[x + 1..] {
                if n > 1 && get(a, m).overlaps(&get(b, m)) {
                    ties.push((cols[a].0.clone(), cols[b].0.clone()));
                }
            }
        }
        v.rankings.push(Ranking {
            metric: m.into(),
            order: idx.iter().map(|&i| cols[i].0.clone()).collect(),
            ties,
        });
    }
    let best_of = |m: &str| -> usize {
        (0..cols.len()).min_by(|&a, &b| get(a, m).median.total_cmp(&get(b, m).median)).unwrap_or(0)
    };
    for m in DECIDING {
        let b = best_of(m);
        let tied: Vec<String> = (0..cols.len())
            .filter(|&i| i != b && n > 1 && get(i, m).overlaps(&get(b, m)))
            .map(|i| cols[i].0.clone())
            .collect();
        let mut costs = std::collections::BTreeMap::new();
        let mut cost_words = Vec::new();
        for o in DECIDING.iter().filter(|o| **o != m) {
            let ob = best_of(o);
            let (mine, best) = (get(b, o).median, get(ob, o).median);
            let c = if best > 0.0 { mine / best - 1.0 } else { 0.0 };
            costs.insert(o.to_string(), c);
            if ob == b || c.abs() < 0.005 {
                cost_words.push(format!(
                    "{} {}, {}",
                    label(o),
                    show(o, mine),
                    if ob == b { "the best too" } else { "as the best's (within 0.5%)" }
                ));
            } else {
                let tie = n > 1 && get(b, o).overlaps(&get(ob, o));
                cost_words.push(format!(
                    "{} {} is {:+.0}% against {}'s {}{}",
                    label(o),
                    show(o, mine),
                    c * 100.0,
                    cols[ob].0,
                    show(o, best),
                    if tie { " (a tie: the ranges overlap)" } else { "" }
                ));
            }
        }
        let sp = get(b, m);
        let range =
            if n > 1 { format!(" [{} to {}]", show(m, sp.min), show(m, sp.max)) } else { String::new() };
        let mut line = format!("best {}: {} ({}{range})", label(m), cols[b].0, show(m, sp.median));
        if cols.len() > 1 {
            if !tied.is_empty() {
                line += &format!(", tied with {} (ranges overlap)", tied.join(", "));
            } else if n > 1 {
                line += ", ahead of every other column beyond the rounds' range";
            }
        }
        line += &format!("; it costs: {}", cost_words.join("; "));
        v.lines.push(line);
        v.best.push(Best { metric: m.into(), backend: cols[b].0.clone(), tied_with: tied, costs });
    }
    for r in v.rankings.iter().filter(|r| DECIDING.contains(&r.metric.as_str())) {
        if !r.ties.is_empty() {
            let t: Vec<String> = r.ties.iter().map(|(a, b)| format!("{a} = {b}")).collect();
            v.lines.push(format!("ties in {}: {}", label(&r.metric), t.join("; ")));
        }
    }
    if n < 2 {
        v.lines
            .push("one round: no measure of the noise, so no ties can be called (--rounds 3 or more)".into());
    } else {
        v.lines.push(format!(
            "medians of {n} rounds, columns run in rotated order; two columns whose ranges overlap are a tie"
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(vals: &[(&str, &[f64])]) -> Rounds {
        let mut r = Rounds { n: vals[0].1.len(), ..Rounds::default() };
        for (m, _) in METRICS {
            let v = vals.iter().find(|(k, _)| *k == m).map(|(_, v)| v.to_vec()).unwrap_or(vec![1.0; r.n]);
            r.metrics.insert(m.into(), Spread::of(v));
        }
        r
    }

    #[test]
    fn spread_and_ties() {
        let s = Spread::of(vec![3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert!(s.overlaps(&Spread::of(vec![2.5, 9.0])));
        assert!(!s.overlaps(&Spread::of(vec![3.5, 9.0])));
    }

    #[test]
    fn verdict_names_best_costs_and_ties() {
        let cols = vec![
            (
                "a".to_string(),
                rounds(&[
                    ("alloc_ns", &[10.0, 11.0, 12.0]),
                    ("peak_rss_bytes", &[200.0, 200.0, 200.0]),
                    ("mean_rss_bytes", &[100.0, 100.0, 100.0]),
                ]),
            ),
            (
                "b".to_string(),
                rounds(&[
                    ("alloc_ns", &[11.5, 13.0, 14.0]),
                    ("peak_rss_bytes", &[100.0, 100.0, 100.0]),
                    ("mean_rss_bytes", &[100.0, 101.0, 102.0]),
                ]),
            ),
            (
                "c".to_string(),
                rounds(&[
                    ("alloc_ns", &[20.0, 21.0, 22.0]),
                    ("peak_rss_bytes", &[300.0, 300.0, 300.0]),
                    ("mean_rss_bytes", &[300.0, 300.0, 300.0]),
                ]),
            ),
        ];
        let v = verdict(&cols);
        let t = &v.best[0];
        assert_eq!((t.metric.as_str(), t.backend.as_str()), ("alloc_ns", "a"));
        assert_eq!(t.tied_with, ["b"]);
        assert!((t.costs["peak_rss_bytes"] - 1.0).abs() < 1e-9);
        assert_eq!(v.best[1].backend, "b");
        assert!(v.best[1].tied_with.is_empty());
        let alloc = &v.rankings[0];
        assert_eq!(alloc.order, ["a", "b", "c"]);
        assert_eq!(alloc.ties, [("a".to_string(), "b".to_string())]);
        assert!(v.lines[0].starts_with("best time in allocator: a"), "{}", v.lines[0]);
        assert!(v.lines.iter().any(|l| l.starts_with("ties in time in allocator: a = b")));
    }
}
