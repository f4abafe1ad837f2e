//! `stats --classes SPEC`: the size-class what-if printed (analysis/whatif.rs computes it):
//! one line per configuration, then for each the classes where its slop moved most against
//! the first configuration.
use super::units::{bytes, count, pct};
use crate::analysis::whatif::{ClassRow, Config};
use std::io::{self, Write};

fn signed(v: i64) -> String {
    let s = if v < 0 { "-" } else { "+" };
    format!("{s}{}", bytes(v.unsigned_abs()))
}

pub fn write(w: &mut dyn Write, configs: &[Config]) -> io::Result<()> {
    let Some(first) = configs.first() else { return Ok(()) };
    writeln!(w)?;
    writeln!(
        w,
        "size-class what-if ({} allocations, {} requested; slop: class size - request, summed per allocation; against the first configuration)",
        count(first.allocations),
        bytes(first.requested_bytes)
    )?;
    writeln!(
        w,
        "  {:>2} {:>11} {:>8} {:>11} {:>11} {:>8} {:>11} {:>8}  configuration",
        "#", "slop", "share", "change", "at peak", "of live", "change", "classes"
    )?;
    for (i, c) in configs.iter().enumerate() {
        let (ch, pch) = if i == 0 {
            ("-".to_string(), "-".to_string())
        } else {
            (signed(c.slop_change_bytes), signed(c.slop_at_peak_change_bytes))
        };
        writeln!(
            w,
            "  {:>2} {:>11} {:>8} {:>11} {:>11} {:>8} {:>11} {:>8}  {}",
            i + 1,
            bytes(c.slop_bytes),
            pct(c.slop_share),
            ch,
            bytes(c.at_peak.slop_bytes),
            pct(c.at_peak.slop_share),
            pch,
            count(c.classes_used),
            c.label
        )?;
        if c.above_classes > 0 {
            writeln!(
                w,
                "  {:>2} {} allocations ({}) above its largest class, not rounded",
                "",
                count(c.above_classes),
                bytes(c.above_classes_bytes)
            )?;
        }
    }
    for (i, c) in configs.iter().enumerate() {
        writeln!(w)?;
        if i == 0 {
            writeln!(w, "  1: where the slop of {} lies (the classes with the most)", c.label)?;
        } else {
            writeln!(w, "  {}: the classes whose slop changed most against 1, {}", i + 1, c.label)?;
        }
        rows(w, &c.most_changed, i == 0)?;
    }
    Ok(())
}

fn rows(w: &mut dyn Write, rows: &[ClassRow], first: bool) -> io::Result<()> {
    if rows.is_empty() {
        return writeln!(w, "     (no class changed)");
    }
    writeln!(
        w,
        "     {:>10} {:>21} {:>11} {:>11} {:>11} {:>11}",
        "class", "requests", "allocations", "slop", "slop in 1", "change"
    )?;
    for r in rows {
        let span = if r.smallest_request == r.largest_request {
            format!("{}", r.smallest_request)
        } else {
            format!("{}..{}", r.smallest_request, r.largest_request)
        };
        let change = if first { "-".to_string() } else { signed(r.change_bytes) };
        writeln!(
            w,
            "     {:>10} {:>21} {:>11} {:>11} {:>11} {:>11}",
            bytes(r.class_bytes),
            span,
            count(r.allocations),
            bytes(r.slop_bytes),
            bytes(r.first_slop_bytes),
            change
        )?;
    }
    Ok(())
}
