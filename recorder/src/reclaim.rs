//! Dead processes' in-flight files: found in the user's in-flight directory
//! (`BASE/shim-UID`, crate::inflight::user_dir), recovered into the logs their headers name
//! (crate::recover) and removed, so that a process that keeps dying (a crash loop) does not
//! leave its buffers in tmpfs, i.e. in RAM, until someone reads its log.
//!
//! Used by the shim (a thread of its own, started by the recorder thread after start-up,
//! a bounded number of files per start and per second) and by `shimlog recover --all`.
//! A file is dead when its lock is free and its process (the header's pid) does not map it:
//! a live process's file is never touched. A dead file whose records cannot be put in its
//! log (the log gone, or not writable) is removed, with one line saying so (the shim: in its
//! watch log when it has one, else on stderr).
use crate::recover::{claim, pid_in_name, NotRecovered, Recovered};
use crate::window_event::{INFLIGHT_EMPTY, INFLIGHT_LOG_GONE, INFLIGHT_LOG_UNWRITABLE};
use std::os::unix::fs::MetadataExt;

/// An in-flight file in the directory.
#[derive(Clone, Debug)]
pub struct Entry {
    pub path: String,
    /// Bytes of memory (tmpfs) it takes: its allocated blocks, not its (sparse) length.
    pub bytes: u64,
    /// Last modified (ns since the epoch): the process's last slot it took, or its start.
    pub mtime_ns: i128,
}

/// What [`reclaim`] did with one file.
#[derive(Debug)]
pub enum Outcome {
    /// Its records are in its logs (none when everything was written already), the file gone.
    Recovered(Vec<Recovered>),
    /// Removed without recovery: why ([`crate::window_event`]'s `INFLIGHT_*` code, for a
    /// watch log's record), the dead process's pid, and one line saying so.
    Removed { why: u64, pid: u32, line: String },
    /// Left as it is: its process lives, another reader took it first, or another version of
    /// the shim wrote it (one line why).
    Left(String),
}

/// The `*.inflight` files in `dir`, oldest first. A directory that does not exist holds none.
pub fn list(dir: &str) -> std::io::Result<Vec<Entry>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut v: Vec<Entry> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".inflight"))
        .filter_map(|e| {
            let m = e.metadata().ok().filter(|m| m.is_file())?;
            Some(Entry {
                path: e.path().to_string_lossy().into_owned(),
                bytes: m.blocks() * 512,
                mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            })
        })
        .collect();
    v.sort_by(|a, b| a.mtime_ns.cmp(&b.mtime_ns).then_with(|| a.path.cmp(&b.path)));
    Ok(v)
}

/// True when the file's process is gone (its lock free, its pid not mapping it) and this
/// build can deal with it. Looks only: the lock is let go at once.
pub fn dead(path: &str) -> bool {
    match claim(path) {
        Ok(c) => c.readable().is_ok(),
        Err(NotRecovered::Failed(_)) => true,
        Err(_) => false,
    }
}

/// Which dead files to handle now, oldest first: while the dead files together take more
/// than `cap` bytes the oldest of them (at most `over_cap` files), and at least the `budget`
/// oldest. Returns them and the bytes all dead files take.
pub fn plan(dir: &str, cap: u64, budget: usize, over_cap: usize) -> std::io::Result<(Vec<Entry>, u64)> {
    let dead: Vec<Entry> = list(dir)?.into_iter().filter(|e| dead(&e.path)).collect();
    let total: u64 = dead.iter().map(|e| e.bytes).sum();
    let mut left = total;
    let mut n = 0;
    while n < dead.len() && (n < budget || left > cap && n < over_cap) {
        left -= dead[n].bytes;
        n += 1;
    }
    Ok((dead.into_iter().take(n).collect(), total))
}

/// How many files the in-flight directory `dir` holds, from one `stat` of it, when it is on
/// tmpfs (whose directories grow by 20 bytes an entry from 40: BOGO_DIRENT_SIZE in Linux's
/// mm/shmem.c); None elsewhere, or when it cannot be looked at. Live processes' files count.
pub fn entries(dir: &str) -> Option<u64> {
    let c = std::ffi::CString::new(dir).ok()?;
    // SAFETY: statfs and stat into locals.
    unsafe {
        let mut fs: libc::statfs = core::mem::zeroed();
        let mut st: libc::stat = core::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut fs) != 0
            || fs.f_type != libc::TMPFS_MAGIC
            || libc::stat(c.as_ptr(), &mut st) != 0
        {
            return None;
        }
        Some((st.st_size as u64).saturating_sub(40) / 20)
    }
}

/// What a dead one-thread process's file takes: its header page and the two buffers it
/// fills (its thread's and the recorder's own), in whole pages (136 KiB).
pub fn smallest_file() -> u64 {
    (crate::inflight::HEADER_LEN + 2 * crate::inflight::slot_size()).next_multiple_of(4096) as u64
}

/// True when a directory holding `entries` files may be near `cap`: half of it taken were
/// they all as small as a dead process's ([`smallest_file`]).
pub fn crowded(entries: u64, cap: u64) -> bool {
    entries.saturating_mul(smallest_file()).saturating_mul(2) > cap
}

/// Up to `n` dead files in `dir`, oldest first by the start time their names carry
/// (`PID-START.inflight`): no `stat` of each file, and only the oldest are probed, so that a
/// process that lives a millisecond can still find them.
pub fn oldest_dead(dir: &str, n: usize) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut v: Vec<(u64, String)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let start = name.strip_suffix(".inflight")?.split_once('-')?.1.parse().ok()?;
            Some((start, e.path().to_string_lossy().into_owned()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).filter(|p| dead(p)).take(n).collect()
}

/// Recovers the dead file at `path` into its logs and removes it; removes it with one line
/// when its records cannot be put there. A live process's file, or one another reader holds,
/// is left alone.
pub fn reclaim(path: &str) -> Outcome {
    let c = match claim(path) {
        Ok(c) => c,
        Err(NotRecovered::Running) => return Outcome::Left(format!("{path}: its process still runs")),
        Err(NotRecovered::Nothing) => {
            return Outcome::Left(format!("{path}: gone already (another reader took it)"))
        }
        Err(NotRecovered::Untouched(m)) => return Outcome::Left(m),
        // No header, its process gone: nothing in it to recover.
        Err(NotRecovered::Failed(m)) => {
            let _ = std::fs::remove_file(path);
            return Outcome::Removed { why: INFLIGHT_EMPTY, pid: pid_in_name(path).unwrap_or(0), line: m };
        }
    };
    if let Err(NotRecovered::Untouched(m)) = c.readable() {
        return Outcome::Left(m);
    }
    let pid = c.pid;
    match c.recover(&c.log()) {
        Ok(done) => Outcome::Recovered(done),
        Err(NotRecovered::Failed(m)) => {
            let why = if std::path::Path::new(&c.log()).exists() {
                INFLIGHT_LOG_UNWRITABLE
            } else {
                INFLIGHT_LOG_GONE
            };
            c.remove();
            Outcome::Removed { why, pid, line: format!("{m}: pid {pid}'s records are lost") }
        }
        Err(NotRecovered::Untouched(m)) => Outcome::Left(m),
        Err(NotRecovered::Running | NotRecovered::Nothing) => Outcome::Left(format!("{path}: left")),
    }
}

/// The line that says what [`reclaim`] did with one file (`who` starts it: "shim", "shimlog").
pub fn said(who: &str, path: &str, o: &Outcome) -> String {
    match o {
        Outcome::Recovered(done) if done.is_empty() => {
            format!("{who}: {path}: recovered (its records were all in its log already); removed")
        }
        Outcome::Recovered(done) => {
            let logs: Vec<String> = done
                .iter()
                .map(|r| format!("{} records in {} frames into {}", r.records, r.frames, r.log))
                .collect();
            format!("{who}: {path}: recovered {}; removed", logs.join(", "))
        }
        Outcome::Removed { line, .. } => format!("{who}: in-flight file removed: {line}"),
        Outcome::Left(m) => format!("{who}: left alone: {m}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    /// A file as a process that died while making it leaves it (no header), its pid gone,
    /// `blocks` 4 KiB blocks of data, modified `age` seconds ago.
    fn dead_file(dir: &std::path::Path, n: u32, blocks: usize, age: u64) -> String {
        // Pids above the kernel's limit (4194304) never run.
        let p = dir.join(format!("{}-{n}.inflight", 4_194_400 + n));
        std::fs::write(&p, vec![1u8; blocks * 4096]).unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(age)).unwrap();
        p.to_string_lossy().into_owned()
    }

    #[test]
    fn oldest_first_budget_then_cap() {
        let d = std::env::temp_dir().join(format!("reclaim-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        // Five files of 4 blocks, the oldest first in age, named against that order.
        let paths: Vec<String> = (0..5).map(|i| dead_file(&d, 9 - i, 4, 100 - i as u64)).collect();
        let dir = d.to_str().unwrap();
        let each = list(dir).unwrap()[0].bytes;
        assert!(each >= 4 * 4096);
        let names = |v: &[Entry]| v.iter().map(|e| e.path.clone()).collect::<Vec<_>>();
        // Under the cap: the budget alone, oldest first.
        let (todo, total) = plan(dir, u64::MAX, 2, 64).unwrap();
        assert_eq!(names(&todo), paths[..2]);
        assert_eq!(total, 5 * each);
        // Over it: on until two are left (2 * each <= cap), the budget notwithstanding.
        let (todo, _) = plan(dir, 2 * each, 1, 64).unwrap();
        assert_eq!(names(&todo), paths[..3]);
        // At most over_cap files however far over.
        let (todo, _) = plan(dir, 0, 1, 2).unwrap();
        assert_eq!(names(&todo), paths[..2]);
        // Handled: removed with a line saying why, none recovered.
        match reclaim(&paths[0]) {
            Outcome::Removed { why, pid, line } => {
                assert!(line.contains("holds no header"), "{line}");
                assert_eq!((why, pid), (INFLIGHT_EMPTY, 4_194_409));
            }
            o => panic!("{o:?}"),
        }
        assert!(!std::path::Path::new(&paths[0]).exists());
        // A file whose lock is held (a live process) is not dead, and is left alone.
        let f = std::fs::File::open(&paths[1]).unwrap();
        assert_eq!(unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_EX) }, 0);
        assert!(!dead(&paths[1]));
        assert!(matches!(reclaim(&paths[1]), Outcome::Left(_)));
        assert!(std::path::Path::new(&paths[1]).exists());
        drop(f);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// On tmpfs, one stat counts the directory's files; `oldest_dead` goes by the start time
    /// in the names (not the modification times), oldest first, and passes over live files.
    #[test]
    fn entries_and_the_oldest_dead_by_name() {
        let d = std::path::Path::new("/dev/shm").join(format!("reclaim-quick-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let dir = d.to_str().unwrap();
        assert_eq!(entries(dir), Some(0), "/dev/shm must be a tmpfs for this test");
        // Started at 9, 8, ... 5 by their names, modified in the opposite order.
        let paths: Vec<String> = (0..5).map(|i| dead_file(&d, 9 - i, 1, 100 - i as u64)).collect();
        let live = d.join(format!("{}-1.inflight", std::process::id()));
        std::fs::write(&live, b"").unwrap();
        std::fs::write(d.join("not-an-inflight-file"), b"").unwrap();
        assert_eq!(entries(dir), Some(7));
        let oldest: Vec<String> = paths.iter().rev().take(3).cloned().collect();
        assert_eq!(oldest_dead(dir, 3), oldest);
        assert_eq!(oldest_dead(dir, 99).len(), 5);
        assert_eq!(entries(std::env::temp_dir().join("no-such-dir-here").to_str().unwrap()), None);
        // Half of a 64 MiB cap in one-thread dead files: 241 of them.
        assert!(!crowded(240, 64 << 20) && crowded(241, 64 << 20), "{}", smallest_file());
        assert!(crowded(1, 0) && !crowded(0, 0));
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A file being created (no header yet, its lock not yet taken) whose name's pid runs is
    /// left alone; the same file of a pid that is gone is removed.
    #[test]
    fn a_file_being_made_is_left_alone() {
        let d = std::env::temp_dir().join(format!("reclaim-new-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let mine = d.join(format!("{}-1.inflight", std::process::id()));
        std::fs::write(&mine, b"").unwrap();
        let mine = mine.to_str().unwrap();
        assert!(!dead(mine));
        assert!(matches!(reclaim(mine), Outcome::Left(_)));
        assert!(std::path::Path::new(mine).exists());
        let gone = dead_file(&d, 1, 0, 0);
        assert!(dead(&gone));
        assert!(matches!(reclaim(&gone), Outcome::Removed { .. }));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
