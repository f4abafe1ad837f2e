//! Nothing lost when a process dies: itest/programs/c/crash.c under the shim with every backend,
//! ended by SIGKILL, SIGTERM, SIGPIPE, SIGSEGV, abort(), the OOM killer; each log, after
//! recovery, holds every call the program made before its last progress line, and says how
//! the process ended. Also: a clean exit leaves no in-flight file and records its status,
//! a real `git log | head -1` keeps its events, and a shell's forked subshells' frees of
//! inherited blocks are matched to the parent's.
//!
//! Every process here runs with SHIM_INFLIGHT_MAX=off (itest's `command`): one test's program
//! starting must not recover another test's dead process before that test looks at its
//! in-flight file (tests/crash_loop.rs tests the recovery at start).
use itest::*;
use recorder::{Ending, LogReader};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

/// Starts `crash MODE` under the shim with `backend`, its logs in `dir`.
fn start(backend: &str, mode: &str, dir: &Path, setup: impl Fn(&mut std::process::Command)) -> Child {
    let mut c = command(cprog("crash"));
    c.arg(mode);
    preload(&mut c, backend, dir);
    setup(&mut c);
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c.spawn().expect("start crash")
}

/// Reads "calls N" lines until one says at least `until` (None: to the end). Returns the
/// last N read and the reader (still open).
fn progress(child: &mut Child, until: Option<u64>) -> (u64, BufReader<std::process::ChildStdout>) {
    let mut r = BufReader::new(child.stdout.take().expect("stdout"));
    let mut last = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(n) = line.trim().strip_prefix("calls ").and_then(|v| v.parse().ok()) {
            last = n;
        }
        if until.is_some_and(|u| last >= u) {
            break;
        }
    }
    (last, r)
}

/// Waits (at most TIMEOUT) and returns the signal that ended the child, if one did.
fn wait_signal(child: &mut Child) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    let start = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s.signal();
        }
        assert!(start.elapsed() < TIMEOUT, "the program did not end");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn log_of(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("crash.{pid}.shimlog"))
}

/// Calls of the main thread (tid = pid) in the log.
fn main_calls(r: &LogReader, pid: u32) -> u64 {
    r.events().filter(|e| e.op.is_alloc_family() && e.tid == pid).count() as u64
}

/// `shimlog recover LOG`, then the checks every death shares: the in-flight file is gone,
/// the log holds at least `calls` of the main thread's calls, and says it was recovered
/// with `end`. `stats --json` then reads it and says the same.
fn recovered(log: &Path, pid: u32, calls: u64, end: &str, what: &str) {
    let inflight = PathBuf::from(recorder::recover::inflight_of(log.to_str().unwrap()));
    assert!(inflight.is_file(), "{what}: no in-flight file beside {}", log.display());
    let mut c = command(shimlog_bin());
    c.arg("recover").arg(log);
    let out = run(c);
    out.assert_success(&format!("{what}: shimlog recover"));
    assert!(out.stdout_str().contains("records in"), "{what}: recover said {}", out.stdout_str());
    assert!(!inflight.exists(), "{what}: the in-flight file stayed after recovery");
    let r = LogReader::open(log.to_str().unwrap()).unwrap();
    let got = main_calls(&r, pid);
    assert!(
        got >= calls,
        "{what}: the log has {got} calls of the main thread; it printed {calls} before it died"
    );
    match r.ending {
        Ending::Recovered { end: e, records } => {
            assert!(records > 0, "{what}: nothing recovered");
            assert_eq!(e, end, "{what}: how it ended");
        }
        other => panic!("{what}: the log says {other:?}, not recovered"),
    }
    let mut c = command(shimlog_bin());
    c.args(["stats", "--json"]).arg(log);
    let out = run(c);
    out.assert_success(&format!("{what}: stats"));
    let j = out.json();
    assert_eq!(j["process"]["ended"]["how"], "recovered", "{what}: stats' ended");
    assert_eq!(j["unknown_frees"], 0, "{what}: the recovered log has frees of blocks it never saw made");
}

const KILLED: &str = "killed (no end record): a signal, SIGKILL or the OOM killer";

/// The program is killed by the test with `sig` once it has made 20,000 calls.
fn killed_by(sig: i32) {
    for b in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let mut child = start(b, "loop", dir.path(), |_| {});
        let pid = child.id();
        let (calls, _out) = progress(&mut child, Some(20_000));
        unsafe { libc::kill(pid as i32, sig) };
        assert_eq!(wait_signal(&mut child), Some(sig), "{b}: not ended by signal {sig}");
        recovered(&log_of(dir.path(), pid), pid, calls, KILLED, &format!("{b}, signal {sig}"));
    }
}

#[test]
fn sigkill_mid_allocation() {
    killed_by(libc::SIGKILL);
}

#[test]
fn sigterm_default_action() {
    killed_by(libc::SIGTERM);
}

#[test]
fn sigpipe_when_the_reader_goes() {
    for b in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let mut child = start(b, "loop", dir.path(), |_| {});
        let pid = child.id();
        let (calls, out) = progress(&mut child, Some(20_000));
        drop(out); // as `head` exits: the next write gets SIGPIPE
        assert_eq!(wait_signal(&mut child), Some(libc::SIGPIPE), "{b}: not ended by SIGPIPE");
        recovered(&log_of(dir.path(), pid), pid, calls, KILLED, &format!("{b}, SIGPIPE"));
    }
}

#[test]
fn segv_and_abort() {
    for b in BACKENDS {
        for (mode, sig, end) in
            [("segv", libc::SIGSEGV, KILLED), ("abort", libc::SIGABRT, "abort() called (SIGABRT)")]
        {
            let dir = tempfile::tempdir().unwrap();
            let mut child = start(b, mode, dir.path(), |_| {});
            let pid = child.id();
            let (calls, _out) = progress(&mut child, None);
            assert_eq!(wait_signal(&mut child), Some(sig), "{b} {mode}: not ended by signal {sig}");
            assert!(calls >= 19_000, "{b} {mode}: printed {calls}");
            recovered(&log_of(dir.path(), pid), pid, calls, end, &format!("{b}, {mode}"));
        }
    }
}

#[test]
fn clean_exit_says_its_status_and_leaves_no_inflight_file() {
    for b in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let mut child = start(b, "exit7", dir.path(), |_| {});
        let pid = child.id();
        let (calls, _out) = progress(&mut child, None);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(7), "{b}");
        let log = log_of(dir.path(), pid);
        let inflight = recorder::recover::inflight_of(log.to_str().unwrap());
        let base = inflight_base().join("shim-");
        assert!(inflight.starts_with(base.to_str().unwrap()), "{b}: in-flight file at {inflight}");
        assert!(!Path::new(&inflight).exists(), "{b}: in-flight file left at {inflight}");
        let r = LogReader::open(log.to_str().unwrap()).unwrap();
        assert_eq!(r.ending, Ending::Exit { call: "exit", status: 7 }, "{b}");
        assert!(main_calls(&r, pid) >= calls, "{b}");
    }
}

/// The memory cgroup the test process is in (v1 or v2), where a child one can be made.
fn memory_cgroup() -> Option<PathBuf> {
    let me = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        let rel = me.lines().find_map(|l| l.strip_prefix("0::"))?;
        return Some(PathBuf::from(format!("/sys/fs/cgroup{rel}")));
    }
    let rel = me.lines().find_map(|l| l.split_once(":memory:").map(|(_, r)| r.to_string()))?;
    Some(PathBuf::from(format!("/sys/fs/cgroup/memory{rel}")))
}

#[test]
fn oom_killer_in_a_memory_limited_cgroup() {
    let Some(parent) = memory_cgroup() else {
        return itest::skip(
            "cgroup",
            "no memory cgroup found in /proc/self/cgroup (no cgroup delegation here)",
        );
    };
    for b in BACKENDS {
        let cg = parent.join(format!("shim-oom-{}-{b}", std::process::id()));
        let v2 = cg.starts_with("/sys/fs/cgroup") && !cg.starts_with("/sys/fs/cgroup/memory");
        let limit = (64u64 << 20).to_string();
        let made = std::fs::create_dir(&cg).is_ok()
            && if v2 {
                std::fs::write(cg.join("memory.max"), &limit).is_ok()
                    && std::fs::write(cg.join("memory.swap.max"), "0").map_or(true, |_| true)
            } else {
                std::fs::write(cg.join("memory.limit_in_bytes"), &limit).is_ok()
                    && std::fs::write(cg.join("memory.memsw.limit_in_bytes"), &limit).map_or(true, |_| true)
            };
        if !made {
            let _ = std::fs::remove_dir(&cg);
            return itest::skip("cgroup", &format!("cannot make a memory cgroup with a limit under {} (not delegated to this user or container)", parent.display()));
        }
        let procs = std::ffi::CString::new(cg.join("cgroup.procs").to_str().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut child = start(b, "oom", dir.path(), |c| {
            let procs = procs.clone();
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(c, move || {
                    // Into the cgroup before exec (open and write are safe after fork).
                    let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                    if fd < 0 || libc::write(fd, b"0".as_ptr() as *const libc::c_void, 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    libc::close(fd);
                    Ok(())
                });
            }
        });
        let pid = child.id();
        let (calls, _out) = progress(&mut child, None);
        let sig = wait_signal(&mut child);
        let _ = std::fs::remove_dir(&cg);
        assert_eq!(sig, Some(libc::SIGKILL), "{b}: not ended by the OOM killer");
        assert!(calls >= 16, "{b}: only {calls} MiB before the OOM killer");
        let log = log_of(dir.path(), pid);
        recovered(&log, pid, calls, KILLED, &format!("{b}, OOM"));
        // The growth is there: the blocks the program kept, each 1 MiB.
        let mut c = command(shimlog_bin());
        c.args(["stats", "--json"]).arg(&log);
        let j = run(c).json();
        let peak = j["peak_live_bytes"].as_u64().unwrap();
        assert!(peak >= calls << 20, "{b}: peak live {peak} bytes after {calls} blocks of 1 MiB");
    }
}

#[test]
fn git_log_piped_into_head() {
    let root = workspace_root();
    if std::process::Command::new("git").arg("--version").output().is_err() {
        itest::need("git", "apt-get install git");
    }
    if !root.join(".git").exists() {
        return itest::skip(
            "repo",
            &format!("the sources at {} are no git repository (an unpacked tarball?)", root.display()),
        );
    }
    for b in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        // As `git log --stat | head -1`: one line read, then the pipe closed.
        let mut c = command("git");
        c.arg("-C").arg(&root).args(["log", "--stat"]);
        preload(&mut c, b, dir.path());
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = c.spawn().expect("start git");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(first.starts_with("commit "), "{b}: {first}");
        let sig = wait_signal(&mut child);
        assert_eq!(sig, Some(libc::SIGPIPE), "{b}: git did not die of SIGPIPE");
        let logs = list_files(dir.path());
        assert!(!logs.is_empty(), "{b}: git left no log");
        let mut c = command(shimlog_bin());
        c.args(["stats", "--json"]).args(&logs);
        let out = run(c);
        out.assert_success("stats of git's logs");
        let j = out.json();
        let calls = j["ops"]["malloc"].as_u64().unwrap_or(0);
        assert!(calls > 100, "{b}: git's logs hold {calls} mallocs\n{}", out.stderr);
        for l in &logs {
            let inflight = recorder::recover::inflight_of(l.to_str().unwrap());
            assert!(!Path::new(&inflight).exists(), "{b}: not recovered: {}", l.display());
        }
    }
}

#[test]
fn shell_subshells_free_inherited_blocks() {
    for b in BACKENDS {
        let t = run_traced(b, || {
            let mut c = command("bash");
            c.arg("-c").arg(
                "x=$(echo b); for i in 1 2 3 4; do ( y=$i$x; : ); done; v=$(for j in 1 2; do echo $j; done)",
            );
            c
        });
        t.out.assert_success("bash");
        let logs = t.logs();
        assert!(logs.len() >= 5, "{b}: {} logs", logs.len());
        let mut c = command(shimlog_bin());
        c.args(["stats", "--json"]).args(&logs);
        let out = run(c);
        out.assert_success("stats of the shell's logs");
        let j = out.json();
        assert_eq!(j["unknown_frees"], 0, "{b}: frees not matched to any block\n{}", out.stdout_str());
        let inh = j["inherited"]["frees"].as_u64().unwrap_or(0);
        assert!(inh > 0, "{b}: no frees of inherited blocks matched");
        // A child alone: the same frees are unknown (nothing to match them with).
        let child = j["logs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["inherited"]["frees"].as_u64().unwrap_or(0) > 0)
            .unwrap();
        let mut c = command(shimlog_bin());
        c.args(["stats", "--json"]).arg(child["log"].as_str().unwrap());
        let alone = run(c).json();
        assert_eq!(alone["unknown_frees"], child["inherited"]["frees"], "{b}: the child read alone");
        // Replayed alone, the child's inherited blocks were made before its start: their
        // frees are skipped, and counted.
        let mut c = command(shimlog_bin());
        c.args(["replay", "--json", "--backend", b]).arg(child["log"].as_str().unwrap());
        let out = run(c);
        out.assert_success("replay of a fork child");
        let r = out.json();
        assert_eq!(r["program"]["forked"], true, "{b}: replay's program");
        let skipped = r["plan"]["skipped"]["unknown_free"].as_u64().unwrap()
            + r["plan"]["skipped"]["unknown_realloc"].as_u64().unwrap();
        assert_eq!(
            skipped,
            child["inherited"]["frees"].as_u64().unwrap(),
            "{b}: replay skipped {}",
            r["plan"]["skipped"]
        );
    }
}
