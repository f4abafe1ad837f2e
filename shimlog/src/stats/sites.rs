//! The call-site section of `shimlog stats`' text report: the site lists that
//! analysis/sites/rank.rs ranked, with their units.
use super::units;
use crate::analysis::{SiteRow, SitesReport};
use std::io::{self, Write};

/// The human report's section.
pub fn write_text(w: &mut dyn Write, s: &SitesReport) -> io::Result<()> {
    writeln!(w)?;
    let how = match s.sample_bytes {
        Some(m) => format!("sampled every {} on average: totals are estimates (each sample weighted 1 / (1 - exp(-size / mean)))", units::bytes(m)),
        None if s.mode == "all" => "every allocation".to_string(),
        None => "slow calls only".to_string(),
    };
    let past = match s.past_wrappers {
        0 => String::new(),
        n => format!(", {} of them past the program's allocation wrappers (--alloc-fn)", units::count(n)),
    };
    writeln!(
        w,
        "Call sites (SHIM_STACKS={}, {how}; {} stacks{past}, unwound by {})",
        s.mode,
        units::count(s.stacks),
        s.unwind
    )?;
    for i in &s.issues {
        writeln!(w, "   note: {i}")?;
    }
    let est = if s.estimated { "~" } else { "" };
    type Col = (&'static str, fn(&SiteRow) -> String);
    let list = |w: &mut dyn Write, title: &str, rows: &[SiteRow], cols: &[Col]| -> io::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        writeln!(w, "   {title}")?;
        let width = rows.iter().map(|r| r.function.chars().count()).max().unwrap_or(4).clamp(4, 60);
        write!(w, "      {:<width$}", "site")?;
        for (h, _) in cols {
            write!(w, "  {h:>12}")?;
        }
        writeln!(w, "  where")?;
        for r in rows {
            let name: String = r.function.chars().take(width).collect();
            write!(w, "      {name:<width$}")?;
            for (_, f) in cols {
                write!(w, "  {:>12}", f(r))?;
            }
            writeln!(w, "  {}", r.location.clone().unwrap_or_else(|| r.object.clone()))?;
        }
        Ok(())
    };
    if s.mode != "slow" {
        writeln!(
            w,
            "   allocated {est}{} in {est}{} calls; live at the peak ({} at {}) {est}{}; never freed {est}{}",
            units::bytes(s.total_alloc_bytes),
            units::count(s.total_alloc_calls),
            units::bytes(s.peak_bytes),
            units::at(s.peak_at_ns),
            units::bytes(s.total_live_at_peak_bytes),
            units::bytes(s.total_leaked_bytes)
        )?;
        list(
            w,
            "by bytes allocated",
            &s.by_bytes,
            &[("bytes", |r| units::bytes(r.alloc_bytes)), ("calls", |r| units::count(r.alloc_calls))],
        )?;
        list(
            w,
            "by calls",
            &s.by_calls,
            &[("calls", |r| units::count(r.alloc_calls)), ("bytes", |r| units::bytes(r.alloc_bytes))],
        )?;
        list(
            w,
            "live at the peak",
            &s.live_at_peak,
            &[
                ("bytes", |r| units::bytes(r.live_at_peak_bytes)),
                ("blocks", |r| units::count(r.live_at_peak_objects)),
            ],
        )?;
        list(
            w,
            "never freed",
            &s.leaked,
            &[("bytes", |r| units::bytes(r.leaked_bytes)), ("blocks", |r| units::count(r.leaked_objects))],
        )?;
        list(
            w,
            "time inside the allocator (timed calls)",
            &s.by_time,
            &[("time", |r| units::ns(r.timed_ns)), ("timed calls", |r| units::count(r.timed_calls))],
        )?;
    }
    list(
        w,
        "slow calls",
        &s.slow,
        &[("slow calls", |r| units::count(r.slow_calls)), ("time", |r| units::ns(r.slow_ns))],
    )?;
    if s.slow.is_empty() && s.mode == "slow" {
        writeln!(w, "   no slow calls")?;
    }
    if let Some(r) = s.slow.first() {
        writeln!(w, "   slowest site's stack:")?;
        for f in &r.stack {
            writeln!(w, "      {f}")?;
        }
    }
    Ok(())
}
