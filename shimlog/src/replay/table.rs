//! The side-by-side report: one column per backend, the best value of each row marked `*`,
//! every other value followed by how far it is from the best.
use super::results::{Replay, Report};
pub use super::units::{bytes, duration};
use std::fmt::Write;

#[derive(Clone, Copy, PartialEq)]
enum Better {
    Lower,
    Higher,
    /// Shown, not ranked (the same for every backend, or not a figure of merit).
    None,
}

#[derive(Clone, Copy)]
enum Unit {
    Ns,
    Bytes,
    Count,
    Ratio,
    Rate,
}

struct Row {
    label: String,
    vals: Vec<Option<f64>>,
    unit: Unit,
    better: Better,
}

pub fn count(c: f64) -> String {
    let s = format!("{:.0}", c.abs());
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if c < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

fn rate(r: f64) -> String {
    match r {
        r if r >= 1e6 => format!("{:.2} M/s", r / 1e6),
        r if r >= 1e3 => format!("{:.1} k/s", r / 1e3),
        r => format!("{r:.0} /s"),
    }
}

fn fmt(v: f64, u: Unit) -> String {
    match u {
        Unit::Ns => duration(v),
        Unit::Bytes => bytes(v),
        Unit::Count => count(v),
        Unit::Ratio => format!("{v:.2}x"),
        Unit::Rate => rate(v),
    }
}

fn cells(r: &Row) -> Vec<String> {
    let known: Vec<f64> = r.vals.iter().flatten().copied().collect();
    let best = match r.better {
        Better::Lower => known.iter().copied().reduce(f64::min),
        Better::Higher => known.iter().copied().reduce(f64::max),
        Better::None => None,
    };
    // Ranking one value, or values that are all equal, says nothing.
    let ranked = best.is_some() && known.len() > 1 && known.iter().any(|v| Some(*v) != best);
    r.vals
        .iter()
        .map(|v| match v {
            None => "-".to_string(),
            Some(v) if !ranked => fmt(*v, r.unit),
            Some(v) if Some(*v) == best => format!("{} *", fmt(*v, r.unit)),
            Some(v) => {
                let b = best.unwrap_or(0.0);
                if b == 0.0 {
                    format!("{} (best 0)", fmt(*v, r.unit))
                } else {
                    format!("{} {:+.0}%", fmt(*v, r.unit), (v - b) / b * 100.0)
                }
            }
        })
        .collect()
}

fn sparkline(vals: &[f64], width: usize, max: f64) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if vals.is_empty() || max <= 0.0 {
        return String::new();
    }
    (0..width.min(vals.len()))
        .map(|i| {
            let lo = i * vals.len() / width.min(vals.len());
            let hi = ((i + 1) * vals.len() / width.min(vals.len())).max(lo + 1);
            let v = vals[lo..hi].iter().copied().fold(0.0, f64::max);
            BARS[((v / max * 7.0).round() as usize).min(7)]
        })
        .collect()
}

fn rows(cols: &[Option<&Replay>]) -> Vec<Row> {
    let mut out = Vec::new();
    let mut row = |label: &str, unit: Unit, better: Better, f: &dyn Fn(&Replay) -> Option<f64>| {
        out.push(Row {
            label: label.to_string(),
            vals: cols.iter().map(|c| c.and_then(f)).collect(),
            unit,
            better,
        });
    };
    use Better::*;
    row("wall time", Unit::Ns, Lower, &|r| Some(r.wall_ns as f64));
    row("cpu time (user+sys)", Unit::Ns, Lower, &|r| Some((r.cpu_user_ns + r.cpu_sys_ns) as f64));
    row("time in allocator (sampled)", Unit::Ns, Lower, &|r| Some(r.alloc_ns_total as f64));
    row("events/s per thread (median)", Unit::Rate, Higher, &|r| Some(r.events_per_s_per_thread.median));
    row("events/s, all threads", Unit::Rate, Higher, &|r| Some(r.events_per_s_total));
    let mut fns: Vec<String> = Vec::new();
    for c in cols.iter().flatten() {
        for k in c.latency.keys() {
            if k != "all" && !fns.contains(k) {
                fns.push(k.clone());
            }
        }
    }
    fns.sort_by_key(|f| ["malloc", "calloc", "memalign", "realloc", "free"].iter().position(|x| x == f));
    fns.insert(0, "all".to_string());
    for f in &fns {
        let g = |r: &Replay| r.latency.get(f).cloned();
        row(&format!("{f} p50"), Unit::Ns, Lower, &|r| g(r).map(|p| p.p50_ns as f64));
        row(&format!("{f} p99"), Unit::Ns, Lower, &|r| g(r).map(|p| p.p99_ns as f64));
        row(&format!("{f} p99.9"), Unit::Ns, Lower, &|r| g(r).map(|p| p.p99_9_ns as f64));
        row(&format!("{f} max"), Unit::Ns, Lower, &|r| g(r).map(|p| p.max_ns as f64));
    }
    row("peak RSS", Unit::Bytes, Lower, &|r| Some(r.memory.peak_rss_bytes as f64));
    row("RSS at end", Unit::Bytes, Lower, &|r| Some(r.memory.end_rss_bytes as f64));
    row("  of which huge pages", Unit::Bytes, Lower, &|r| r.memory.end_huge_page_bytes.map(|b| b as f64));
    row("fragmentation (peak RSS / ideal)", Unit::Ratio, Lower, &|r| Some(r.memory.fragmentation));
    row("slop (usable - requested)", Unit::Bytes, Lower, &|r| Some(r.slop_bytes_total as f64));
    let mut classes: Vec<(u64, String)> = Vec::new();
    for c in cols.iter().flatten() {
        for s in &c.slop {
            if !classes.iter().any(|(_, l)| *l == s.class) {
                classes.push((s.max_request, s.class.clone()));
            }
        }
    }
    classes.sort();
    for (_, cl) in &classes {
        row(&format!("  slop, requests {cl}"), Unit::Bytes, Lower, &|r| {
            r.slop.iter().find(|s| s.class == *cl).map(|s| s.slop_bytes as f64)
        });
    }
    row("minor page faults", Unit::Count, Lower, &|r| Some(r.minor_faults as f64));
    row("major page faults", Unit::Count, Lower, &|r| Some(r.major_faults as f64));
    row("involuntary context switches", Unit::Count, Lower, &|r| Some(r.involuntary_context_switches as f64));
    row("ops replayed", Unit::Count, None, &|r| Some(r.ops_total as f64));
    row("cross-thread frees", Unit::Count, None, &|r| Some(r.cross_thread_frees as f64));
    row("cross-thread reallocs", Unit::Count, None, &|r| Some(r.cross_thread_reallocs as f64));
    row("waits for another thread", Unit::Count, None, &|r| Some(r.waits as f64));
    row("threads running at once (most)", Unit::Count, None, &|r| Some(r.max_threads_running as f64));
    row("allocation failures", Unit::Count, None, &|r| Some(r.replay_failures as f64));
    out
}

/// The report for people.
pub fn render(rep: &Report) -> String {
    let mut s = String::new();
    let p = &rep.plan;
    let _ = writeln!(s, "replay of {}", rep.log);
    let cmd =
        if rep.program.cmdline.is_empty() { rep.program.exe.clone() } else { rep.program.cmdline.join(" ") };
    let mut cmd: String = cmd.escape_debug().collect();
    if cmd.chars().count() > 120 {
        cmd = cmd.chars().take(117).collect::<String>() + "...";
    }
    // The resolved executable in full, after the command line however long.
    if let Some(e) = crate::name::resolved(&rep.program.exe, &rep.program.cmdline) {
        cmd = format!("{cmd} (runs {})", e.escape_debug());
    }
    let _ = writeln!(
        s,
        "  program: {cmd} (pid {}, recorded on {})",
        rep.program.pid, rep.program.recorded_backend
    );
    match rep.program.window {
        Some(0) => {
            let _ = writeln!(s, "  this is the process's watch log: no calls recorded, nothing to replay");
        }
        Some(n) => {
            let _ = writeln!(
                s,
                "  capture window {n} of the process: blocks made before it are not replayed, their frees and reallocs are skipped (counted below)"
            );
        }
        None => {}
    }
    if rep.program.forked {
        let _ = writeln!(
            s,
            "  a fork child: the blocks it inherited from its parent are made before the start, not replayed; their frees and reallocs are skipped (counted below)"
        );
    }
    let _ = writeln!(
        s,
        "  log: {} events, {} malloc-family calls, {} threads, {} recorded",
        count(p.events as f64),
        count(p.calls as f64),
        p.threads,
        duration(p.recorded_duration_ns as f64)
    );
    let ops: Vec<String> = p.ops.iter().map(|(k, v)| format!("{k} {}", count(*v as f64))).collect();
    let _ = writeln!(s, "  replayed per backend: {} ops ({})", count(p.ops_total as f64), ops.join(", "));
    let _ = writeln!(
        s,
        "  ideal (peak live requested bytes): {} in {} blocks; cross-thread frees {}, reallocs {}",
        bytes(p.ideal_bytes as f64),
        count(p.peak_live_blocks as f64),
        count(p.cross_thread_frees as f64),
        count(p.cross_thread_reallocs as f64)
    );
    let sk = &p.skipped;
    let _ = writeln!(
        s,
        "  skipped: {} frees and {} reallocs of pointers never seen allocated, {} NULL results, {} free(NULL), {} missed frees",
        count(sk.unknown_free as f64),
        count(sk.unknown_realloc as f64),
        count(sk.null_result as f64),
        count(sk.free_null as f64),
        count(sk.missed_free as f64)
    );
    s.push('\n');

    let cols: Vec<Option<&Replay>> = rep.backends.iter().map(|b| b.replay.as_ref()).collect();
    let heads: Vec<String> = rep
        .backends
        .iter()
        .map(|b| match &b.replay {
            Some(r) => format!("{} {}", b.backend, r.version),
            None => format!("{} (failed)", b.backend),
        })
        .collect();
    let rows = rows(&cols);
    let cells: Vec<Vec<String>> = rows.iter().map(cells).collect();
    let lw = rows.iter().map(|r| r.label.len()).max().unwrap_or(0).max(6);
    let cw: Vec<usize> = (0..heads.len())
        .map(|i| cells.iter().map(|c| c[i].chars().count()).chain([heads[i].len()]).max().unwrap_or(0))
        .collect();
    let _ = write!(s, "{:<lw$}", "");
    for (h, w) in heads.iter().zip(&cw) {
        let _ = write!(s, "  {h:>w$}");
    }
    s.push('\n');
    for (r, c) in rows.iter().zip(&cells) {
        let _ = write!(s, "{:<lw$}", r.label);
        for (v, w) in c.iter().zip(&cw) {
            let pad = w.saturating_sub(v.chars().count());
            let _ = write!(s, "  {:pad$}{v}", "");
        }
        s.push('\n');
    }
    let _ = writeln!(s, "(* best in the row; +N% how much more, -N% how much less than the best)");
    if rep.options.rounds > 1 {
        let _ = writeln!(
            s,
            "(each column's figures above are those of its median round by time in the allocator; the rounds below)"
        );
        s.push_str(&rounds_table(rep));
    }

    let nw = rep.backends.iter().map(|b| b.backend.len() + 1).max().unwrap_or(0).max(9);
    let max_rss = cols.iter().flatten().map(|r| r.memory.peak_rss_bytes).max().unwrap_or(0) as f64;
    if max_rss > 0.0 {
        let _ = writeln!(s, "\nRSS over time (common scale, peak {}):", bytes(max_rss));
        for b in &rep.backends {
            if let Some(r) = &b.replay {
                let v: Vec<f64> = r.memory.samples.iter().map(|x| x.rss_bytes as f64).collect();
                let _ = writeln!(
                    s,
                    "  {:<nw$}{}  ({} samples over {})",
                    b.backend,
                    sparkline(&v, 60, max_rss),
                    v.len(),
                    duration(r.wall_ns as f64)
                );
            }
        }
    }
    let _ = writeln!(s, "\nallocator statistics after the replay:");
    for b in &rep.backends {
        match (&b.replay, &b.error) {
            (Some(r), _) => {
                let st: Vec<String> =
                    r.allocator_stats.iter().map(|(k, v)| format!("{k} {}", bytes(*v as f64))).collect();
                let _ = writeln!(s, "  {:<nw$}{}", b.backend, st.join(", "));
            }
            (None, Some(e)) => {
                let _ = writeln!(s, "  {:<nw$}replay failed: {e}", b.backend);
            }
            _ => {}
        }
    }
    let set: Vec<String> = rep
        .backends
        .iter()
        .filter_map(|b| {
            let r = b.replay.as_ref()?;
            (!r.settings.is_empty()).then(|| {
                let kv: Vec<String> = r.settings.iter().map(|(k, v)| format!("{k} {v}")).collect();
                format!("  {}: {}", b.backend, kv.join(", "))
            })
        })
        .collect();
    if !set.is_empty() {
        let _ = writeln!(s, "\nsettings as each allocator reports them after the replay:");
        for l in set {
            let _ = writeln!(s, "{l}");
        }
    }
    if let Some(v) = &rep.verdict {
        let _ = writeln!(s, "\nverdict:");
        for l in &v.lines {
            let _ = writeln!(s, "  {l}");
        }
    }
    s.push('\n');
    for n in &rep.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// The rounds: each figure's median with its range per column; `*` the best median, `=`
/// a column whose range overlaps the best's (a tie).
fn rounds_table(rep: &Report) -> String {
    use super::rounds::METRICS;
    let mut s = String::new();
    let cols: Vec<(&str, &super::results::Rounds)> =
        rep.backends.iter().filter_map(|b| Some((b.backend.as_str(), b.rounds.as_ref()?))).collect();
    if cols.is_empty() {
        return s;
    }
    let _ = writeln!(s, "\nover {} rounds: median [min to max]", rep.options.rounds);
    let mut lines: Vec<(String, Vec<String>)> = Vec::new();
    for (m, label) in METRICS {
        let sp: Vec<super::results::Spread> =
            cols.iter().map(|(_, r)| r.metrics.get(m).cloned().unwrap_or_default()).collect();
        let best = (0..sp.len()).min_by(|&a, &b| sp[a].median.total_cmp(&sp[b].median)).unwrap_or(0);
        let f = |v: f64| if m.ends_with("_ns") { duration(v) } else { bytes(v) };
        let cells = sp
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let mark = if sp.len() < 2 {
                    ""
                } else if i == best {
                    " *"
                } else if x.overlaps(&sp[best]) {
                    " ="
                } else {
                    "  "
                };
                format!("{} [{} to {}]{mark}", f(x.median), f(x.min), f(x.max))
            })
            .collect();
        lines.push((label.to_string(), cells));
    }
    let lw = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let cw: Vec<usize> = (0..cols.len())
        .map(|i| lines.iter().map(|(_, c)| c[i].chars().count()).chain([cols[i].0.len()]).max().unwrap_or(0))
        .collect();
    let _ = write!(s, "{:<lw$}", "");
    for ((h, _), w) in cols.iter().zip(&cw) {
        let _ = write!(s, "  {h:>w$}");
    }
    s.push('\n');
    for (l, c) in &lines {
        let _ = write!(s, "{l:<lw$}");
        for (v, w) in c.iter().zip(&cw) {
            let _ = write!(s, "  {v:>w$}");
        }
        s.push('\n');
    }
    let _ = writeln!(s, "(* lowest median; = its range overlaps the lowest's: a tie)");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_is_marked_and_others_are_relative() {
        let r = Row {
            label: "x".into(),
            vals: vec![Some(100.0), Some(150.0), Some(50.0), None],
            unit: Unit::Count,
            better: Better::Lower,
        };
        assert_eq!(cells(&r), vec!["100 +100%", "150 +200%", "50 *", "-"]);
        let r = Row { better: Better::Higher, ..r };
        assert_eq!(cells(&r), vec!["100 -33%", "150 *", "50 -67%", "-"]);
        let same = Row {
            label: "x".into(),
            vals: vec![Some(3.0), Some(3.0)],
            unit: Unit::Count,
            better: Better::Lower,
        };
        assert_eq!(cells(&same), vec!["3", "3"]);
    }

    #[test]
    fn units() {
        assert_eq!(count(1234567.0), "1,234,567");
        assert_eq!(count(12.0), "12");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(duration(1_500_000.0), "1.50 ms");
    }
}
