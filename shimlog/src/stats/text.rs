//! The human report: for each section a heading and a few aligned tables with units.
//! Everything here is rendered from [`Section`], the same data `--json` prints.
use super::tree::TreeRow;
use super::units::{at, bytes, count, ns, pct, rate};
use crate::analysis::Section;
use std::io::{self, Write};

/// Rows the report shows where the JSON has more.
const ROWS: usize = 10;

/// Aligned columns: the first left-aligned, the others right-aligned.
struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(head: &[&str]) -> Table {
        Table { rows: vec![head.iter().map(|s| s.to_string()).collect()] }
    }
    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
    fn write(&self, w: &mut dyn Write) -> io::Result<()> {
        let n = self.rows.iter().map(|r| r.len()).max().unwrap_or(0);
        let width: Vec<usize> = (0..n)
            .map(|c| self.rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
            .collect();
        for r in &self.rows {
            let mut line = String::from("   ");
            for (c, cell) in r.iter().enumerate() {
                let pad = width[c] - cell.chars().count();
                if c == 0 {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                } else {
                    line.push_str("  ");
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
            }
            writeln!(w, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// Per-process sections shown without `--each`: the largest by events.
pub const LARGEST: usize = 5;

/// One log: its section. Several: the process tree, the total, then each process's section
/// in the tree's order (`each`: all of them; otherwise the [`LARGEST`] by events, and a line
/// saying how many were left out and how to see them).
pub fn write(
    w: &mut dyn Write,
    sections: &[Section],
    total: &Section,
    tree: &[TreeRow],
    each: bool,
) -> io::Result<()> {
    if sections.is_empty() {
        return section(w, total);
    }
    super::tree::write(w, tree)?;
    let mut shown: Vec<usize> = tree.iter().map(|r| r.log_index).collect();
    if !each && shown.len() > LARGEST {
        let mut by_size = shown.clone();
        by_size.sort_by_key(|&i| std::cmp::Reverse(sections[i].totals.events));
        let keep: std::collections::BTreeSet<usize> = by_size[..LARGEST].iter().copied().collect();
        shown.retain(|i| keep.contains(i));
        writeln!(
            w,
            "   below: the total, then the {LARGEST} processes with the most events; {} left out (`shimlog stats --each` shows every one)",
            sections.len() - LARGEST
        )?;
    }
    writeln!(w)?;
    section(w, total)?;
    for &i in &shown {
        writeln!(w)?;
        section(w, &sections[i])?;
    }
    Ok(())
}

fn section(w: &mut dyn Write, s: &Section) -> io::Result<()> {
    heading(w, s)?;
    read(w, s)?;
    if let Some(r) = &s.watch {
        super::watch::write(w, r, s.unknown_frees)?;
    }
    totals(w, s)?;
    sizes(w, s)?;
    slop(w, s)?;
    lifetimes(w, s)?;
    threads(w, s)?;
    memory(w, s)?;
    latency(w, s)?;
    if let Some(r) = &s.sites {
        super::sites::write_text(w, r)?;
    }
    Ok(())
}

fn heading(w: &mut dyn Write, s: &Section) -> io::Result<()> {
    match (&s.log, &s.process) {
        (Some(log), Some(p)) => {
            writeln!(w, "== {log}")?;
            let mut args = if p.cmdline.is_empty() { p.exe.clone() } else { p.cmdline.join(" ") };
            if let Some(e) = crate::name::resolved(&p.exe, &p.cmdline) {
                args.push_str(&format!(" (runs {e})"));
            }
            writeln!(
                w,
                "   pid {} (parent {}{}) {args}",
                p.pid,
                p.ppid,
                if p.forked { ", forked" } else { "" }
            )?;
            let reach = if p.own_allocators.iter().any(|a| a.mode != "switched") {
                " (for the calls LD_PRELOAD reaches)"
            } else {
                ""
            };
            writeln!(
                w,
                "   backend {} {}{reach}, timing {}, on full: {}, clock {}",
                s.backend, p.backend_version, p.timing, p.on_full, p.clock
            )?;
            for a in &p.own_allocators {
                writeln!(w, "   allocator: {}", own_allocator(a, &s.backend, &p.exe))?;
            }
            if let Some(mean) = p.sampled_only {
                writeln!(
                    w,
                    "   recorded: sampled allocations only (SHIM_RECORD=sample, every {} on average), their frees and the slow calls: the totals below count those; the call sites' are estimates of all",
                    bytes(mean)
                )?;
            }
            if let Some(parent) = &p.parent_log {
                writeln!(w, "   forked from the process of {parent}")?;
            }
            writeln!(w, "   ended: {}", p.ended)
        }
        _ => writeln!(w, "== total of {} processes (backends: {})", s.processes, s.backend),
    }
}

fn read(w: &mut dyn Write, s: &Section) -> io::Result<()> {
    let r = &s.read;
    writeln!(
        w,
        "   read {} frames ({} columnar), {} compressed{}",
        count(r.frames),
        count(r.columnar_frames),
        bytes(r.compressed_bytes),
        if r.clean_end {
            "; the log was closed cleanly"
        } else {
            "; the log has no end record (process killed, or still running)"
        }
    )?;
    if r.calls_after_cut > 0 {
        writeln!(w, "   {} calls made after the exit flush's cut are left out", count(r.calls_after_cut))?;
    }
    for i in &r.issues {
        match &i.log {
            Some(l) => writeln!(w, "   warning: {l}: {}", i.message)?,
            None => writeln!(w, "   warning: {}", i.message)?,
        }
    }
    Ok(())
}

fn totals(w: &mut dyn Write, s: &Section) -> io::Result<()> {
    let t = &s.totals;
    writeln!(w, "\nTotals")?;
    writeln!(
        w,
        "   {} events in {} ({}), {} threads; dropped {} events in {} batches; {} calls untraced",
        count(t.events),
        ns(t.duration_ns),
        rate(t.events_per_sec),
        count(t.threads),
        count(t.dropped.events),
        count(t.dropped.records),
        count(t.untraced_calls)
    )?;
    let mut tb = Table::new(&["op", "calls", "requested", "failed"]);
    for op in recorder::Op::ALLOC_OPS {
        let calls = t.ops.get(op.name()).copied().unwrap_or(0);
        if calls == 0 {
            continue;
        }
        let b = t.bytes.get(op.name()).map_or("-".into(), |b| bytes(*b));
        let f = t.failed.get(op.name()).copied().unwrap_or(0);
        tb.row(vec![op.name().into(), count(calls), b, count(f)]);
    }
    tb.write(w)?;
    for d in t.dropped.when.iter().take(3) {
        writeln!(w, "   dropped {} events on tid {} at {}", count(d.events), d.tid, at(d.ts_ns))?;
    }
    writeln!(
        w,
        "   peak live {} in {} blocks at {}; live at end {} in {} blocks",
        bytes(s.peak_live_bytes),
        count(s.peak_live_blocks),
        at(s.peak_live_at_ns),
        bytes(s.live_at_end.bytes),
        count(s.live_at_end.blocks)
    )?;
    if s.unknown_frees + s.address_reuse_conflicts + t.free_null > 0 {
        writeln!(
            w,
            "   free(NULL) {}; frees of pointers not live {}; live addresses returned again {}",
            count(t.free_null),
            count(s.unknown_frees),
            count(s.address_reuse_conflicts)
        )?;
    }
    if let Some(i) = &s.inherited {
        writeln!(
            w,
            "   inherited at fork: {} blocks of the parent live; {} of them freed by the child ({}, mean age {})",
            count(i.blocks_at_fork),
            count(i.frees),
            bytes(i.bytes_freed),
            ns(i.mean_age_ns)
        )?;
    } else if s.unknown_frees > 0 && s.process.as_ref().is_some_and(|p| p.forked) {
        writeln!(
            w,
            "   (a fork child: give its parent's log too, and its frees of inherited blocks are matched)"
        )?;
    }
    Ok(())
}

fn sizes(w: &mut dyn Write, s: &Section) -> io::Result<()> {
    let z = &s.sizes;
    let all: u64 = z.buckets.iter().map(|b| b.requests).sum();
    writeln!(w, "\nRequest sizes ({} distinct)", count(z.distinct))?;
    let mut tb = Table::new(&["size", "requests", "share", "bytes"]);
    for b in &z.buckets {
        let range =
            if b.from == b.to { bytes(b.from) } else { format!("{} - {}", bytes(b.from), bytes(b.to)) };
        tb.row(vec![range, count(b.requests), pct(ratio(b.requests, all)), bytes(b.bytes)]);
    }
    tb.write(w)?;
    let top: Vec<String> = z
        .top
        .iter()
        .take(ROWS)
        .map(|e| format!("{} ({})", bytes(e.size), pct(ratio(e.requests, all))))
        .collect();
    if !top.is_empty() {
        writeln!(w, "   most frequent: {}", top.join(", "))?;
    }
    Ok(())
}

fn slop(w: &mut dyn Write, s: &Section) -> io::Result<()> {
    writeln!(w, "\nSize-class waste (slop: class size - requested, classes asked of each backend)")?;
    let mut tb = Table::new(&["backend", "over the run", "share", "at peak", "share", "worst class"]);
    for b in s.slop.values() {
        let worst = b
            .classes
            .iter()
            .max_by_key(|c| c.slop_bytes)
            .filter(|c| c.slop_bytes > 0)
            .map_or("-".into(), |c| format!("{} ({})", bytes(c.class_bytes), bytes(c.slop_bytes)));
        tb.row(vec![
            format!("{} {}", b.backend, b.version),
            bytes(b.slop_bytes),
            pct(b.slop_share),
            bytes(b.at_peak.slop_bytes),
            pct(b.at_peak.slop_share),
            worst,
        ]);
    }
    tb.write(w)
}

fn lifetimes(w: &mut dyn Write, s: &Section) -> io::Result<()> {
    let l = &s.lifetimes;
    writeln!(w, "\nLifetimes")?;
    writeln!(
        w,
        "   {} blocks freed, {} never freed ({}); freed within 1 µs: {}, within 1 ms: {}",
        count(l.freed_blocks),
        count(l.never_freed_blocks),
        bytes(l.never_freed_bytes),
        pct(l.share_within_1us),
        pct(l.share_within_1ms)
    )?;
    let b = &l.allocs_between;
    let mut tb = Table::new(&["", "p50", "p90", "p99", "max"]);
    tb.row(vec!["time alive".into(), ns(l.p50_ns), ns(l.p90_ns), ns(l.p99_ns), ns(l.max_ns)]);
    tb.row(vec!["allocations in between".into(), count(b.p50), count(b.p90), count(b.p99), count(b.max)]);
    tb.write(w)?;
    let never: Vec<String> = l
        .never_freed_by_size
        .iter()
        .take(5)
        .map(|n| format!("{} x {}", count(n.blocks), bytes(n.size)))
        .collect();
    if !never.is_empty() {
        writeln!(w, "   never freed, by size: {}", never.join(", "))?;
    }
    Ok(())
}

fn threads(w: &mut dyn Write, s: &Section) -> io::Result<()> {
    let t = &s.threads_detail;
    writeln!(w, "\nThreads")?;
    let mut tb = Table::new(&["tid", "allocs", "frees", "allocated", "cross-thread frees", "dropped"]);
    for r in t.per_thread.iter().take(ROWS) {
        let tid = if s.processes > 1 { format!("{}/{}", r.pid, r.tid) } else { r.tid.to_string() };
        tb.row(vec![
            tid,
            count(r.allocs),
            count(r.frees),
            bytes(r.bytes_allocated),
            count(r.cross_thread_frees),
            count(r.dropped_events),
        ]);
    }
    tb.write(w)?;
    if t.per_thread.len() > ROWS {
        writeln!(w, "   ... {} more threads in --json", t.per_thread.len() - ROWS)?;
    }
    let c = &t.cross_thread_frees;
    let pairs: Vec<String> = c
        .top_pairs
        .iter()
        .take(3)
        .map(|p| format!("{} -> {}: {}", p.alloc_tid, p.free_tid, count(p.count)))
        .collect();
    writeln!(
        w,
        "   cross-thread frees: {} ({} of frees){}{}",
        count(c.count),
        pct(c.share),
        if pairs.is_empty() { "" } else { "; made -> freed by: " },
        pairs.join(", ")
    )?;
    let b = &t.free_bursts;
    match &b.longest {
        Some(l) => writeln!(
            w,
            "   free bursts (>= {} frees, no allocation between): {}, {} frees; longest {} frees on tid {} at {} ({})",
            b.min_run,
            count(b.count),
            count(b.frees),
            count(l.frees),
            l.tid,
            at(l.start_ns),
            ns(l.end_ns - l.start_ns)
        ),
        None => writeln!(w, "   free bursts (>= {} frees, no allocation between): none", b.min_run),
    }
}

fn memory(w: &mut dyn Write, s: &Section) -> io::Result<()> {
    let m = &s.memory;
    writeln!(w, "\nMemory over time")?;
    let mut tb = Table::new(&["time", "rss", "live", "blocks", "max live since previous"]);
    let n = m.samples.len();
    // At most ROWS rows, evenly spread, the last sample included.
    let step = n.div_ceil(ROWS).max(1);
    for (i, smp) in m.samples.iter().enumerate() {
        if i % step != 0 && i != n - 1 {
            continue;
        }
        tb.row(vec![
            at(smp.ts_ns),
            smp.rss_bytes.map_or("-".into(), bytes),
            bytes(smp.live_bytes),
            count(smp.live_blocks),
            bytes(smp.max_live_bytes),
        ]);
    }
    if n > 0 {
        tb.write(w)?;
    }
    let peak = match &m.rss_at_peak {
        Some(r) => format!(
            "; RSS {} at {} ({} per live byte)",
            bytes(r.rss_bytes),
            at(r.ts_ns),
            r.rss_per_live.map_or("-".into(), |x| format!("{x:.2}"))
        ),
        None => String::new(),
    };
    writeln!(w, "   peak live {} at {}{}", bytes(s.peak_live_bytes), at(s.peak_live_at_ns), peak)?;
    if let Some(r) = &m.rss_at_end {
        writeln!(
            w,
            "   at end: RSS {}, live {} ({} per live byte)",
            bytes(r.rss_bytes),
            bytes(r.live_bytes),
            r.rss_per_live.map_or("-".into(), |x| format!("{x:.2}"))
        )?;
    }
    Ok(())
}

fn latency(w: &mut dyn Write, s: &Section) -> io::Result<()> {
    let l = &s.latency;
    writeln!(w, "\nTime inside the allocator ({} timed calls)", count(l.timed_calls))?;
    if l.timed_calls == 0 {
        return Ok(());
    }
    let mut tb = Table::new(&["op", "timed", "p50", "p90", "p99", "p99.9", "max"]);
    for op in recorder::Op::ALLOC_OPS {
        if let Some(o) = l.per_op.get(op.name()) {
            tb.row(vec![
                op.name().into(),
                count(o.timed_calls),
                ns(o.p50_ns),
                ns(o.p90_ns),
                ns(o.p99_ns),
                ns(o.p999_ns),
                ns(o.max_ns),
            ]);
        }
    }
    tb.write(w)?;
    writeln!(w, "   slowest calls ({} in --json):", l.slowest.len())?;
    let mut tb = Table::new(&["op", "inside", "at", "tid", "size", "freed"]);
    for c in l.slowest.iter().take(ROWS) {
        let tid = if s.processes > 1 { format!("{}/{}", c.pid, c.tid) } else { c.tid.to_string() };
        tb.row(vec![
            c.op.into(),
            ns(c.backend_ns),
            at(c.ts_ns),
            tid,
            if c.op == "free" { "-".into() } else { bytes(c.size) },
            c.freed_bytes.map_or("-".into(), bytes),
        ]);
    }
    tb.write(w)
}

fn ratio(a: u64, b: u64) -> f64 {
    crate::analysis::ratio(a, b)
}

/// "the program's own jemalloc 5.3.0 (unprefixed, in the executable), recorded".
fn own_allocator(a: &recorder::format::OwnAllocator, backend: &str, exe: &str) -> String {
    let version = if a.version.is_empty() { String::new() } else { format!(" {}", a.version) };
    let prefix = if a.prefix.is_empty() { "unprefixed".to_string() } else { format!("prefix {}", a.prefix) };
    let place = if a.file == exe { "in the executable".to_string() } else { format!("in {}", a.file) };
    let what = match a.mode.as_str() {
        "recorded" => "its calls recorded".to_string(),
        "switched" => format!("switched to {backend}"),
        _ => format!("not recorded: {}", a.note),
    };
    let note =
        if a.mode != "untouched" && !a.note.is_empty() { format!(" ({})", a.note) } else { String::new() };
    format!(
        "the program's own {}{version} ({prefix}, {place}, {} entry points), {what}{note}",
        a.family, a.entry_points
    )
}
