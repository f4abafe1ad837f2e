//! The human report of `compare`: the two sides, the method, one table per group of
//! metrics with its verdict line, and the call sites that moved most.
use super::boot::Row;
use super::document::{Document, SideInfo, SiteMove, Verdict};
use super::metrics::{Dim, Group};
use crate::stats::units;
use std::io::{self, Write};

/// Counted in the table, left out of the verdicts (how many calls carry a time is not a
/// property of the allocator).
const NOT_IN_VERDICT: &[&str] = &["timed_calls"];

/// The interval column of a metric with one value per log, one log a side.
const NO_INTERVAL: &str = "none: one value a side";

pub fn value(d: Dim, v: f64) -> String {
    match d {
        Dim::Ns => units::ns(v.round().max(0.0) as u64),
        Dim::Bytes => units::bytes(v.round().max(0.0) as u64),
        Dim::PerSecond => units::rate(v),
        Dim::PerHour => format!("{v:.1} /h"),
        Dim::Ratio => format!("{v:.3}"),
        Dim::Count => units::count(v.round().max(0.0) as u64),
    }
}

fn signed(d: Dim, v: f64) -> String {
    let s = if v < 0.0 { "-" } else { "+" };
    match d {
        Dim::Ratio => format!("{v:+.3}"),
        Dim::PerHour => format!("{v:+.1} /h"),
        _ => format!("{s}{}", value(d, v.abs())),
    }
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// The change as printed: relative when the base is not 0, else absolute.
pub fn change(r: &Row) -> (String, String) {
    match (r.relative, r.relative_interval, r.change, r.interval) {
        (Some(x), Some([lo, hi]), _, _) => (pct(x), format!("{} .. {}", pct(lo), pct(hi))),
        (Some(x), None, _, _) => (pct(x), NO_INTERVAL.into()),
        (None, _, Some(c), Some([lo, hi])) => {
            (signed(r.unit, c), format!("{} .. {}", signed(r.unit, lo), signed(r.unit, hi)))
        }
        (None, _, Some(c), None) => (signed(r.unit, c), "-".into()),
        _ => ("-".into(), "-".into()),
    }
}

pub fn verdict(g: Group, rows: &[Row]) -> Verdict {
    let mine: Vec<&Row> =
        rows.iter().filter(|r| r.group == g && !NOT_IN_VERDICT.contains(&r.name.as_str())).collect();
    let title = g.title();
    let compared: Vec<&&Row> = mine.iter().filter(|r| r.not_compared.is_none()).collect();
    if compared.is_empty() {
        let why = mine
            .iter()
            .find_map(|r| r.not_compared.clone())
            .unwrap_or_else(|| "nothing reported by both sides".into());
        return Verdict { group: g, differs: false, text: format!("{title}: not compared ({why})") };
    }
    let moved: Vec<&&Row> = compared.iter().filter(|r| r.differs).copied().collect();
    if compared.iter().all(|r| !r.judged) {
        let most = compared
            .iter()
            .filter(|r| r.relative.is_some())
            .max_by(|a, b| a.relative.unwrap_or(0.0).abs().total_cmp(&b.relative.unwrap_or(0.0).abs()))
            .map(|r| format!("; the largest change: {} {}", r.name, change(r).0))
            .unwrap_or_default();
        return Verdict {
            group: g,
            differs: false,
            text: format!("{title}: not judged from fewer than 5 logs a side (two runs of one program differ here by more than their slices show: latency and stalls always, memory and calls from one log a side or from runs under 1.5 s; give 2 runs a side for memory and calls, 5 for latency, taken in turns){most}"),
        };
    }
    if moved.is_empty() {
        return Verdict {
            group: g,
            differs: false,
            text: format!("{title}: no difference beyond the noise"),
        };
    }
    let up = moved.iter().all(|r| r.change.unwrap_or(0.0) > 0.0);
    let down = moved.iter().all(|r| r.change.unwrap_or(0.0) < 0.0);
    let lead = match (g, up, down) {
        (Group::Latency, true, _) => "the candidate is slower",
        (Group::Latency, _, true) => "the candidate is faster",
        (Group::Memory, true, _) => "the candidate uses more memory",
        (Group::Memory, _, true) => "the candidate uses less memory",
        (_, true, _) => "higher in the candidate",
        (_, _, true) => "lower in the candidate",
        _ => "changed both ways",
    };
    let list: Vec<String> = moved
        .iter()
        .map(|r| {
            let (c, i) = change(r);
            format!(
                "{} {c} ({})",
                r.name,
                if i == NO_INTERVAL { "no interval: one value a side" } else { &i }
            )
        })
        .collect();
    Verdict { group: g, differs: true, text: format!("{title}: {lead}: {}", list.join(", ")) }
}

fn side(w: &mut dyn Write, name: &str, s: &SideInfo) -> io::Result<()> {
    let kinds: Vec<String> = s.kinds.iter().map(|k| format!("{k:?}").to_lowercase()).collect();
    let logs = if s.logs.len() == 1 {
        s.logs[0].clone()
    } else {
        format!("{} logs ({} ..)", s.logs.len(), s.logs[0])
    };
    writeln!(
        w,
        "{name:<10} {logs}: {} on {}, {} log{}, {} time slices",
        s.programs.join(", "),
        s.backends.join(", "),
        kinds.join(" + "),
        if s.logs.len() == 1 { "" } else { "s" },
        s.slices
    )
}

pub fn write(w: &mut dyn Write, d: &Document) -> io::Result<()> {
    side(w, "base", &d.base)?;
    side(w, "candidate", &d.candidate)?;
    let conf = d.method.confidence * 100.0;
    writeln!(
        w,
        "intervals: {conf}%, bootstrap over {} ({} resamples, seed {}); a change counts when its interval excludes 0 and it is at least the group's floor",
        d.method.resampling, d.method.resamples, d.method.seed
    )?;
    for (g, v) in Group::ALL.iter().zip(&d.verdicts) {
        let rows: Vec<&Row> = d.metrics.iter().filter(|r| r.group == *g).collect();
        writeln!(w)?;
        match rows.first() {
            Some(r) => writeln!(w, "{} (floor {:.0}%)", g.title(), r.floor * 100.0)?,
            None => writeln!(w, "{}", g.title())?,
        }
        if rows.iter().any(|r| r.not_compared.is_none()) {
            writeln!(
                w,
                "  {:<18} {:>12} {:>12} {:>10}   {conf}% interval",
                "metric", "base", "candidate", "change"
            )?;
        }
        for r in rows.iter().filter(|r| r.not_compared.is_none()) {
            let (c, i) = change(r);
            let mark = if r.differs {
                "*"
            } else if !r.judged {
                "~"
            } else {
                " "
            };
            writeln!(
                w,
                "{mark} {:<18} {:>12} {:>12} {:>10}   {i}",
                r.name,
                r.base.map_or("-".into(), |v| value(r.unit, v)),
                r.candidate.map_or("-".into(), |v| value(r.unit, v)),
                c
            )?;
        }
        let left: Vec<&str> =
            rows.iter().filter(|r| r.not_compared.is_some()).map(|r| r.name.as_str()).collect();
        if !left.is_empty() && left.len() < rows.len() {
            let why = rows.iter().find_map(|r| r.not_compared.as_deref()).unwrap_or("");
            writeln!(w, "  not compared: {} ({why})", left.join(", "))?;
        }
        if rows.iter().any(|r| !r.judged && r.not_compared.is_none()) {
            writeln!(w, "  ~ not judged from fewer than 5 logs a side (run-to-run noise; for memory and calls: one log a side, or a log under 1.5 s: docs/compare.md)")?;
        }
        writeln!(w, "verdict: {}", v.text)?;
    }
    if let Some(s) = &d.sites {
        writeln!(w)?;
        writeln!(
            w,
            "call sites that moved most{} (mean per log)",
            if s.estimated { ", estimated from samples" } else { "" }
        )?;
        sites(w, "bytes allocated", &s.alloc_bytes, Dim::Bytes)?;
        sites(w, "bytes live at the peak", &s.live_at_peak_bytes, Dim::Bytes)?;
        sites(w, "time inside the allocator (timed calls)", &s.timed_ns, Dim::Ns)?;
    }
    Ok(())
}

fn sites(w: &mut dyn Write, what: &str, v: &[SiteMove], d: Dim) -> io::Result<()> {
    writeln!(w, "  by {what}:")?;
    if v.is_empty() {
        writeln!(w, "    (no change)")?;
    }
    for m in v {
        writeln!(
            w,
            "    {:>12} {:>12} {:>12}  {}",
            value(d, m.base),
            value(d, m.candidate),
            signed(d, m.change),
            m.site
        )?;
    }
    Ok(())
}
