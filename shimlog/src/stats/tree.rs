//! The process tree of several logs: one row per log (pid, parent, program, lifetime,
//! events, peak live, peak RSS, how it ended), roots first and each process's children
//! beneath it. `stats` opens with it (text) and carries it as `tree` (--json); `shimlog
//! record` prints the same order from the logs' headers (record/summary.rs uses [`order`]).
use super::units::{bytes, count, ns};
use crate::analysis::Section;
use recorder::Ending;
use serde::Serialize;
use std::collections::BTreeSet;
use std::io::{self, Write};

/// One process of the tree, as `stats --json` prints it (`tree`).
#[derive(Serialize, Clone, Debug)]
pub struct TreeRow {
    /// Index into `logs` (the per-process sections, in the order the logs were given).
    pub log_index: usize,
    pub log: String,
    pub pid: u32,
    pub ppid: u32,
    /// Levels below its root (a parent not among the logs is no level).
    pub depth: usize,
    pub program: String,
    /// From its first record to its last.
    pub lifetime_ns: u64,
    pub events: u64,
    pub peak_live_bytes: u64,
    /// Absent without RSS records.
    pub peak_rss_bytes: Option<u64>,
    /// As `process.ended`, in a few words: exit(0), _exit(3), exec, killed (recovered)...
    pub ended: String,
}

/// The order to show processes in: roots first (a parent not among them, or itself), each
/// process's logs in start order (an exec continues the pid), then its children beneath it;
/// a cycle of reused pids is shown flat at the end. `procs` is (pid, ppid) in start order;
/// the result is (index into `procs`, depth).
pub fn order(procs: &[(u32, u32)]) -> Vec<(usize, usize)> {
    let pids: BTreeSet<u32> = procs.iter().map(|p| p.0).collect();
    let mut out = Vec::new();
    let mut done = BTreeSet::new();
    let roots: Vec<u32> = procs.iter().filter(|p| !pids.contains(&p.1) || p.1 == p.0).map(|p| p.0).collect();
    for pid in roots {
        walk(procs, pid, 0, &mut done, &mut out);
    }
    let mut seen = vec![false; procs.len()];
    out.iter().for_each(|&(i, _)| seen[i] = true);
    out.extend((0..procs.len()).filter(|&i| !seen[i]).map(|i| (i, 0)));
    out
}

fn walk(
    procs: &[(u32, u32)],
    pid: u32,
    depth: usize,
    done: &mut BTreeSet<u32>,
    out: &mut Vec<(usize, usize)>,
) {
    if !done.insert(pid) {
        return;
    }
    out.extend((0..procs.len()).filter(|&i| procs[i].0 == pid).map(|i| (i, depth)));
    let kids: Vec<u32> = procs.iter().filter(|p| p.1 == pid && p.0 != pid).map(|p| p.0).collect();
    for k in kids {
        walk(procs, k, depth + 1, done, out);
    }
}

/// How a process ended, in a few words.
pub fn ended(e: &Ending) -> String {
    match *e {
        Ending::Exit { call: "exec", .. } => "exec".into(),
        Ending::Exit { call, status } => format!("{call}({status})"),
        Ending::Closed => "closed".into(),
        Ending::Recovered { end, .. } if end.starts_with("abort") => "abort() (recovered)".into(),
        Ending::Recovered { .. } => "killed (recovered)".into(),
        Ending::NoEnd => "no end: still running?".into(),
    }
}

/// The program's name (its executable's file name), marked when a fork child or a capture
/// window's log.
pub fn program(exe: &str, cmdline: &[String], forked: bool, window: Option<u32>) -> String {
    let mut s = crate::name::started(exe, cmdline);
    if forked {
        s.push_str(" (fork)");
    }
    match window {
        Some(0) => s.push_str(" [watch log]"),
        Some(n) => s.push_str(&format!(" [window {n}]")),
        None => {}
    }
    s
}

/// The tree of `sections` (one per log), in [`order`].
pub fn rows(sections: &[Section]) -> Vec<TreeRow> {
    let mut idx: Vec<usize> = (0..sections.len()).collect();
    let start = |s: &Section| s.process.as_ref().map_or(u64::MAX, |p| p.start_unix_ns);
    let pid = |s: &Section| s.process.as_ref().map_or((0, 0), |p| (p.pid, p.ppid));
    idx.sort_by_key(|&i| (start(&sections[i]), pid(&sections[i]).0, i));
    let procs: Vec<(u32, u32)> = idx.iter().map(|&i| pid(&sections[i])).collect();
    order(&procs)
        .into_iter()
        .map(|(k, depth)| {
            let i = idx[k];
            let s = &sections[i];
            let (program, ended) = match &s.process {
                Some(p) => (
                    program(&p.exe, &p.cmdline, p.forked, s.watch.as_ref().map(|w| w.window)),
                    self::ended(&p.ended),
                ),
                None => (String::new(), String::new()),
            };
            TreeRow {
                log_index: i,
                log: s.log.clone().unwrap_or_default(),
                pid: procs[k].0,
                ppid: procs[k].1,
                depth,
                program,
                lifetime_ns: s.totals.duration_ns,
                events: s.totals.events,
                peak_live_bytes: s.peak_live_bytes,
                peak_rss_bytes: s.memory.peak_rss_bytes,
                ended,
            }
        })
        .collect()
}

/// The table, with the program names indented by depth.
pub fn write(w: &mut dyn Write, rows: &[TreeRow]) -> io::Result<()> {
    writeln!(w, "== process tree: {} processes", rows.len())?;
    let head = ["pid", "parent", "program", "lifetime", "events", "peak live", "peak RSS", "ended"];
    let mut cells: Vec<[String; 8]> = vec![head.map(String::from)];
    for r in rows {
        cells.push([
            r.pid.to_string(),
            r.ppid.to_string(),
            format!("{}{}", "  ".repeat(r.depth), r.program),
            ns(r.lifetime_ns),
            count(r.events),
            bytes(r.peak_live_bytes),
            r.peak_rss_bytes.map_or("-".into(), bytes),
            r.ended.clone(),
        ]);
    }
    let width: Vec<usize> =
        (0..8).map(|c| cells.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    for r in &cells {
        let mut line = String::from("  ");
        for (c, cell) in r.iter().enumerate() {
            let pad = " ".repeat(width[c] - cell.chars().count());
            // Program and ending read left to right; numbers line up on the right.
            if c == 2 || c == 7 {
                line.push_str(&format!(" {cell}{pad}"));
            } else {
                line.push_str(&format!(" {pad}{cell}"));
            }
        }
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}
