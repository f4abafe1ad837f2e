//! The watch section of `shimlog stats`' text report: the capture windows, the stalls, the
//! allocator's own statistics and the threads seen, as analysis/watch.rs gathered them (or,
//! for one window's log, which window it is).
use super::units::{at, bytes, count, ns};
use crate::analysis::WatchReport;
use std::io::{self, Write};

/// The text report's section.
pub fn write(w: &mut dyn Write, r: &WatchReport, unknown_frees: u64) -> io::Result<()> {
    if r.window > 0 {
        writeln!(w, "\nCapture window {}", r.window)?;
        writeln!(
            w,
            "   this log is one window of the process (its watch log, window 0, has the timeline); {} frees of blocks made before the window",
            count(unknown_frees)
        )?;
        return Ok(());
    }
    writeln!(w, "\nWatch (the process's timeline between and during its capture windows)")?;
    writeln!(w, "   window  started                  length   ended")?;
    for x in &r.windows {
        writeln!(
            w,
            "   {:>6}  {:<24} {:>7}  {}",
            x.number,
            format!("{} {}", x.start_ns.map_or("-".into(), at), x.started),
            x.length_ns.map_or("-".into(), ns),
            x.ended.unwrap_or("still open at the end of the log")
        )?;
    }
    if r.windows.is_empty() {
        writeln!(w, "   no window")?;
    }
    for l in &r.log_limit {
        writeln!(w, "   at {}: window {}: {}", at(l.at_ns), l.window, l.what)?;
    }
    for x in &r.inflight_removed {
        writeln!(w, "   at {}: dead process {}: {}", at(x.at_ns), x.pid, x.why)?;
    }
    writeln!(w, "   stalls (calls inside the allocator over SHIM_STALL): {}", count(r.stalls))?;
    for s in &r.slowest_stalls {
        writeln!(
            w,
            "      at {:>10}  thread {:>7}  {:<14} at least {}",
            at(s.at_ns),
            s.tid,
            s.call,
            ns(s.ns)
        )?;
    }
    if !r.allocator_stats.is_empty() {
        writeln!(w, "   allocator statistics      last        min        max  samples")?;
        for (name, s) in &r.allocator_stats {
            let f = |v: u64| if *name == "page_faults" { count(v) } else { bytes(v) };
            writeln!(
                w,
                "   {:<18} {:>11} {:>10} {:>10}  {}",
                name,
                f(s.last),
                f(s.min),
                f(s.max),
                count(s.samples)
            )?;
        }
    }
    writeln!(
        w,
        "   threads: {} started, {} ended; forks: {}",
        count(r.threads_started),
        count(r.threads_ended),
        count(r.forks)
    )
}
