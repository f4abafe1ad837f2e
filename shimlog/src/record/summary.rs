//! The few lines `shimlog record` prints once the program has ended: each log of the run's
//! directory as a process tree (pid, parent, program, events, how it ended), read from the
//! headers and frame indexes alone (LogReader::open: no event is decoded but the last
//! frames', where the end record is), then the commands that look further.
use crate::stats::tree::{self, ended};
use recorder::{Ending, LogReader};
use std::path::{Path, PathBuf};

/// What one log says of its process.
struct Row {
    file: String,
    pid: u32,
    ppid: u32,
    program: String,
    start: u64,
    what: Result<(u64, Ending), String>,
}

/// The run's logs, oldest first (a dead process's `.inflight` file is not one).
pub fn logs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|x| x == "shimlog"));
    v.sort();
    v
}

fn row(path: &Path) -> Row {
    let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    match crate::open::open(&path.to_string_lossy()) {
        Ok(r) => Row {
            file,
            pid: r.header.pid,
            ppid: r.header.ppid,
            program: program(&r),
            start: r.header.start_unix_ns,
            what: Ok((r.record_count(), r.ending)),
        },
        Err(e) => Row { file, pid: 0, ppid: 0, program: String::new(), start: u64::MAX, what: Err(e) },
    }
}

fn program(r: &LogReader) -> String {
    tree::program(&r.header.exe, &r.header.cmdline, r.header.forked, r.header.window)
}

/// How the shell would say how the program ended.
pub fn status_line(prog: &str, code: i32) -> String {
    if code > 128 {
        let sig = code - 128;
        let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(sig)) }.to_string_lossy().into_owned();
        format!("{prog} was killed by signal {sig} ({name}): exit status {code}")
    } else {
        format!("{prog} exited with status {code}")
    }
}

/// Writes the summary of the logs in `dir` (shown to the user as `shown`).
pub fn print(dir: &Path, shown: &str, head: &str, out: &mut impl std::io::Write) -> std::io::Result<()> {
    let mut rows: Vec<Row> = logs(dir).iter().map(|p| row(p)).collect();
    rows.sort_by_key(|r| (r.start, r.pid));
    let n = rows.len();
    writeln!(out, "shimlog: {head}; {n} log{} in {shown}/", if n == 1 { "" } else { "s" })?;
    if rows.is_empty() {
        writeln!(out, "shimlog: no log was written (was the program linked statically, or setuid?)")?;
        return Ok(());
    }
    writeln!(out, "  {:<28} {:>8} {:>8} {:>12}  {:<22} log", "program", "pid", "parent", "events", "ended")?;
    // Roots first, each process's logs in start order, its children beneath it (stats' tree).
    let procs: Vec<(u32, u32)> = rows.iter().map(|r| (r.pid, r.ppid)).collect();
    let order = tree::order(&procs);
    for (i, depth) in order {
        let r = &rows[i];
        match &r.what {
            Ok((events, end)) => {
                let name = format!("{}{}", "  ".repeat(depth), r.program);
                writeln!(
                    out,
                    "  {name:<28} {:>8} {:>8} {events:>12}  {:<22} {}",
                    r.pid,
                    r.ppid,
                    ended(end),
                    r.file
                )?
            }
            Err(e) => writeln!(out, "  {}: cannot be read: {e}", r.file)?,
        }
    }
    let first = &rows.iter().find(|r| r.what.is_ok()).unwrap_or(&rows[0]).file;
    writeln!(out, "look further:")?;
    writeln!(out, "  shimlog stats {shown}/*.shimlog")?;
    writeln!(out, "  shimlog report {shown}/*.shimlog -o {shown}/report.html")?;
    writeln!(out, "  shimlog replay {shown}/{first}")?;
    Ok(())
}
