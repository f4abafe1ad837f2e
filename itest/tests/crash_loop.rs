//! Crash loops (issue #37): a process that starts under the shim recovers the in-flight files
//! dead processes left (into the logs their headers name) and removes them, oldest first,
//! keeping the dead ones under SHIM_INFLIGHT_MAX; a live process's file is never touched; a
//! dead file whose log is gone is removed with one line; `shimlog recover --all` does the
//! same by hand; a loop of processes that live a millisecond and die by abort(), SIGSEGV or
//! SIGKILL stays under the cap too (issue #41). itest/programs/c/crashloop.c is the canary. Each test has an in-flight directory of
//! its own on /dev/shm (SHIM_INFLIGHT_DIR): none touches the user's files.
use itest::*;
use recorder::{Ending, LogReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `crashloop ARGS` under the shim with `backend`, logs in `logs`, in-flight files under
/// `base`, SHIM_INFLIGHT_MAX=`max` (unset: the shim's default, when `max` is empty).
fn canary(args: &[&str], logs: &Path, base: &Path, max: &str, backend: &str) -> Command {
    let mut c = command(cprog("crashloop"));
    c.args(args);
    preload(&mut c, backend, logs);
    c.env("SHIM_INFLIGHT_DIR", base);
    match max {
        "" => c.env_remove("SHIM_INFLIGHT_MAX"),
        m => c.env("SHIM_INFLIGHT_MAX", m),
    };
    c
}

fn log_of(logs: &Path, pid: u32) -> PathBuf {
    logs.join(format!("crashloop.{pid}.shimlog"))
}

/// The in-flight files in `base`'s user directory: (path, bytes of tmpfs each takes).
fn inflight_files(base: &Path) -> Vec<(String, u64)> {
    let dir = recorder::inflight::user_dir(base.to_str().unwrap());
    recorder::reclaim::list(&dir)
        .expect("list the in-flight directory")
        .into_iter()
        .map(|e| (e.path, e.bytes))
        .collect()
}

fn total_bytes(base: &Path) -> u64 {
    inflight_files(base).iter().map(|f| f.1).sum()
}

/// The "calls N" line the program printed last.
fn calls(out: &Output) -> u64 {
    let s = out.stdout_str();
    s.lines()
        .rev()
        .find_map(|l| l.strip_prefix("calls ").and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no calls line in {s:?}\nstderr:\n{}", out.stderr))
}

fn died_of_abort(out: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    out.status.signal() == Some(libc::SIGABRT)
}

/// `shimlog stats --json LOG`.
fn stats(log: &Path) -> serde_json::Value {
    let mut c = command(shimlog_bin());
    c.args(["stats", "--json"]).arg(log);
    let out = run(c);
    out.assert_success(&format!("stats {}", log.display()));
    out.json()
}

const MIB: u64 = 1 << 20;

#[test]
fn two_hundred_crashes_stay_under_the_cap_and_every_log_is_whole() {
    let base = private_inflight_base();
    let logs = tempfile::tempdir().unwrap();
    let cap = 4 * MIB;
    let mut runs = Vec::new();
    let mut most = 0;
    let start = Instant::now();
    for i in 0..200 {
        let out = run(canary(&["abort", "30"], logs.path(), base.path(), "4M", "glibc"));
        assert!(died_of_abort(&out), "run {i}: ended with {}\nstderr:\n{}", out.status, out.stderr);
        assert!(
            !out.stderr.contains("in-flight file removed"),
            "run {i}: a file was removed although every log is there:\n{}",
            out.stderr
        );
        runs.push((out.pid, calls(&out)));
        most = most.max(total_bytes(base.path()));
    }
    let took = start.elapsed();
    let left = inflight_files(base.path());
    let bytes: u64 = left.iter().map(|f| f.1).sum();
    eprintln!(
        "200 crashes in {took:?}: {} in-flight files left ({bytes} bytes), at most {most} bytes after any run",
        left.len()
    );
    assert!(bytes <= cap, "after 200 crashes the in-flight directory holds {bytes} bytes in {} files, over SHIM_INFLIGHT_MAX={cap}", left.len());
    // Each log: how its process ended, and every call it made (recovered at a later start, or
    // by stats for the last few).
    for (pid, n) in runs {
        let log = log_of(logs.path(), pid);
        let j = stats(&log);
        let ended = &j["process"]["ended"];
        assert_eq!(ended["how"], "recovered", "{}: {ended}", log.display());
        assert_eq!(ended["end"], "abort() called (SIGABRT)", "{}: {ended}", log.display());
        let got = j["ops"]["malloc"].as_u64().unwrap_or(0) + j["ops"]["free"].as_u64().unwrap_or(0);
        assert!(
            got >= n && got <= n + RUNTIME_SLACK,
            "{}: {got} calls in the log, the program made {n}",
            log.display()
        );
    }
    assert!(inflight_files(base.path()).is_empty(), "stats left in-flight files");
}

/// Issue #41: a crash loop of processes that each live about a millisecond (a server that
/// dies at start-up, restarted by its supervisor), dying by abort(), by a SIGSEGV or by
/// SIGKILL, with no other process started: each leaves its file (no process lives the 10 ms
/// after which a start reclaims), yet the in-flight directory stays under
/// SHIM_INFLIGHT_MAX (a start that finds it crowded recovers the oldest at once, and abort()
/// lets that finish), and every log says how its process ended and holds every call. Then
/// the same 100 aborts on the default cap (64M), which a megabyte a crash used to pass.
#[test]
fn one_millisecond_crash_loops_stay_under_the_cap() {
    use std::os::unix::process::ExitStatusExt;
    const ABORT: &str = "abort() called (SIGABRT)";
    const KILLED: &str = "killed (no end record): a signal, SIGKILL or the OOM killer";
    for (kind, signal, end, max, cap) in [
        ("abort", libc::SIGABRT, ABORT, "2M", 2 * MIB),
        ("segv", libc::SIGSEGV, KILLED, "2M", 2 * MIB),
        ("kill", libc::SIGKILL, KILLED, "2M", 2 * MIB),
        ("abort", libc::SIGABRT, ABORT, "", 64 * MIB),
    ] {
        let what = format!("{kind} with SHIM_INFLIGHT_MAX={max:?}");
        let base = private_inflight_base();
        let logs = tempfile::tempdir().unwrap();
        let (mut runs, mut most, mut took) = (Vec::new(), 0, Duration::ZERO);
        for i in 0..100 {
            let out = run(canary(&[kind, "1"], logs.path(), base.path(), max, "glibc"));
            assert_eq!(
                out.status.signal(),
                Some(signal),
                "{what}, run {i}: ended with {}\nstderr:\n{}",
                out.status,
                out.stderr
            );
            assert!(
                !out.stderr.contains("in-flight file removed"),
                "{what}, run {i}: a file was removed although every log is there:\n{}",
                out.stderr
            );
            took += out.elapsed;
            runs.push((out.pid, calls(&out)));
            most = most.max(total_bytes(base.path()));
        }
        let left = inflight_files(base.path());
        let bytes: u64 = left.iter().map(|f| f.1).sum();
        eprintln!(
            "{what}: 100 crashes, {:.1} ms each on average: {} in-flight files left ({bytes} bytes), at most {most} bytes after any run",
            took.as_secs_f64() * 10.0,
            left.len()
        );
        assert!(
            bytes <= cap,
            "{what}: after 100 crashes the in-flight directory holds {bytes} bytes in {} files, over {cap}",
            left.len()
        );
        for (pid, n) in runs {
            let log = log_of(logs.path(), pid);
            let j = stats(&log);
            let ended = &j["process"]["ended"];
            assert_eq!(ended["how"], "recovered", "{what}: {}: {ended}", log.display());
            assert_eq!(ended["end"], end, "{what}: {}: {ended}", log.display());
            let got = j["ops"]["malloc"].as_u64().unwrap_or(0) + j["ops"]["free"].as_u64().unwrap_or(0);
            assert!(
                got >= n && got <= n + RUNTIME_SLACK,
                "{what}: {}: {got} calls in the log, the program made {n}",
                log.display()
            );
        }
        assert!(inflight_files(base.path()).is_empty(), "{what}: stats left in-flight files");
    }
}

/// Dead files made with SHIM_INFLIGHT_MAX=off (nobody reclaims), oldest first: (log, file).
fn dead_files(n: usize, logs: &Path, base: &Path) -> Vec<(PathBuf, String)> {
    let mut v = Vec::new();
    for _ in 0..n {
        let before: Vec<String> = inflight_files(base).into_iter().map(|f| f.0).collect();
        let out = run(canary(&["abort", "3"], logs, base, "off", "glibc"));
        assert!(died_of_abort(&out), "ended with {}\nstderr:\n{}", out.status, out.stderr);
        let new: Vec<String> =
            inflight_files(base).into_iter().map(|f| f.0).filter(|p| !before.contains(p)).collect();
        assert_eq!(new.len(), 1, "the dead process left {new:?}");
        v.push((log_of(logs, out.pid), new[0].clone()));
        // Distinct modification times, so that "oldest" means something.
        std::thread::sleep(Duration::from_millis(5));
    }
    v
}

#[test]
fn past_the_cap_the_oldest_go_first() {
    let base = private_inflight_base();
    let logs = tempfile::tempdir().unwrap();
    let dead = dead_files(12, logs.path(), base.path());
    let each = inflight_files(base.path())[0].1;
    // Room for three: the 8 a start handles are not enough, the cap makes it go on.
    let cap = 3 * each + each / 2;
    let out = run(canary(&["live", "1500"], logs.path(), base.path(), &cap.to_string(), "glibc"));
    out.assert_success("the process that reclaims");
    let left: Vec<String> = inflight_files(base.path()).into_iter().map(|f| f.0).collect();
    let newest: Vec<String> = dead[9..].iter().map(|d| d.1.clone()).collect();
    assert_eq!(
        left, newest,
        "left after a start with SHIM_INFLIGHT_MAX={cap} ({each} bytes a file): not the three newest"
    );
    assert!(total_bytes(base.path()) <= cap);
    for (log, _) in &dead[..9] {
        let r = LogReader::open(log.to_str().unwrap()).unwrap();
        assert!(matches!(r.ending, Ending::Recovered { .. }), "{}: {:?}", log.display(), r.ending);
    }
}

/// `crashloop live MS` started in the background, with SHIM_INFLIGHT_MAX=`max`.
fn start_live(ms: u64, logs: &Path, base: &Path, max: &str, backend: &str) -> Child {
    let mut c = canary(&["live", &ms.to_string()], logs, base, max, backend);
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c.spawn().expect("start crashloop live")
}

#[test]
fn a_live_process_file_is_never_touched() {
    let base = private_inflight_base();
    let logs = tempfile::tempdir().unwrap();
    let long: Vec<Child> =
        ["glibc", "jemalloc"].iter().map(|b| start_live(6000, logs.path(), base.path(), "0", b)).collect();
    let wait_for = Instant::now() + Duration::from_secs(5);
    let files = loop {
        let f: Vec<String> = long
            .iter()
            .filter_map(|c| {
                LogReader::open(log_of(logs.path(), c.id()).to_str().unwrap()).ok()?.header.inflight
            })
            .collect();
        if f.len() == 2 {
            break f;
        }
        assert!(Instant::now() < wait_for, "the long processes named no in-flight file");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Short ones beside them, each reclaiming everything dead (SHIM_INFLIGHT_MAX=0): crashes
    // and clean exits.
    let mut removed = Vec::new();
    for i in 0..40 {
        let args: &[&str] = if i % 2 == 0 { &["abort", "5"] } else { &["live", "30"] };
        let out = run(canary(args, logs.path(), base.path(), "0", "glibc"));
        removed.extend(out.stderr.lines().filter(|l| l.contains("in-flight file")).map(String::from));
        for f in &files {
            assert!(Path::new(f).exists(), "short run {i}: the live process's in-flight file {f} is gone");
        }
    }
    assert!(removed.is_empty(), "the short runs removed in-flight files: {removed:?}");
    for (mut c, f) in long.into_iter().zip(files) {
        let pid = c.id();
        let mut stdout = String::new();
        std::io::Read::read_to_string(c.stdout.as_mut().unwrap(), &mut stdout).unwrap();
        let status = c.wait().unwrap();
        assert!(status.success(), "long process {pid}: {status}");
        let n: u64 = stdout
            .trim()
            .strip_prefix("calls ")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{stdout:?}"));
        assert_whole(&log_of(logs.path(), pid), n, "long process");
        assert!(!Path::new(&f).exists(), "{f}: left after a clean exit");
    }
}

/// A dead process whose log was deleted, then a process that starts beside it on the
/// default SHIM_INFLIGHT_MAX (reclaiming is on unless turned off), with `env` set: its output,
/// the dead file's path, and the directories (kept alive).
fn orphan_then_start(env: &[(&str, &str)]) -> (Output, String, TempDir, TempDir) {
    let base = private_inflight_base();
    let logs = tempfile::tempdir().unwrap();
    let (log, file) = dead_files(1, logs.path(), base.path()).remove(0);
    std::fs::remove_file(log).unwrap();
    let mut c = canary(&["live", "300"], logs.path(), base.path(), "", "glibc");
    c.envs(env.iter().copied());
    let out = run(c);
    out.assert_success("the process that reclaims");
    assert!(!Path::new(&file).exists(), "{file}: still there");
    (out, file, base, logs)
}

/// The log at `log` was closed by exit(0) and holds the `n` calls the program made.
fn assert_whole(log: &Path, n: u64, what: &str) {
    let r =
        LogReader::open(log.to_str().unwrap()).unwrap_or_else(|e| panic!("{what}: {}: {e}", log.display()));
    assert_eq!(r.ending, Ending::Exit { call: "exit", status: 0 }, "{what}: {}", log.display());
    let got = r.events().filter(|e| e.op.is_alloc_family()).count() as u64;
    assert!(
        got >= n && got <= n + RUNTIME_SLACK,
        "{what}: {}: {got} calls logged, the program made {n}",
        log.display()
    );
}

#[test]
fn a_dead_process_whose_log_is_gone_has_its_file_removed_with_one_line() {
    let (out, file, _base, _logs) = orphan_then_start(&[]);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.contains("in-flight")).collect();
    assert_eq!(lines.len(), 1, "stderr:\n{}", out.stderr);
    assert!(
        lines[0].contains(&file) && lines[0].contains("is gone") && lines[0].starts_with("shim: "),
        "{}",
        lines[0]
    );
}

#[test]
fn shimlog_recover_all_recovers_and_removes_by_hand() {
    let base = private_inflight_base();
    let logs = tempfile::tempdir().unwrap();
    let dead = dead_files(3, logs.path(), base.path());
    std::fs::remove_file(&dead[0].0).unwrap();
    // A live one beside them stays (it reclaims nothing itself).
    let mut live = start_live(3000, logs.path(), base.path(), "off", "glibc");
    let wait_for = Instant::now() + Duration::from_secs(5);
    while inflight_files(base.path()).len() < 4 {
        assert!(Instant::now() < wait_for, "the live process made no in-flight file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c = command(shimlog_bin());
    c.args(["recover", "--all"]).env("SHIM_INFLIGHT_DIR", base.path());
    let out = run(c);
    out.assert_success("shimlog recover --all");
    let text = out.stdout_str();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "one line per dead file and a total:\n{text}");
    assert!(
        lines[0].contains(&dead[0].1) && lines[0].contains("is gone") && lines[0].contains("removed"),
        "{}",
        lines[0]
    );
    for (i, (log, file)) in dead.iter().enumerate().skip(1) {
        assert!(
            lines[i].contains(file.as_str())
                && lines[i].contains("recovered")
                && lines[i].contains(log.to_str().unwrap()),
            "{}",
            lines[i]
        );
        let r = LogReader::open(log.to_str().unwrap()).unwrap();
        assert!(matches!(r.ending, Ending::Recovered { .. }), "{}: {:?}", log.display(), r.ending);
    }
    assert!(lines[3].contains("2 recovered, 1 removed"), "{}", lines[3]);
    let left = inflight_files(base.path());
    assert_eq!(left.len(), 1, "left: {left:?}");
    assert!(left[0].0.contains(&format!("/{}-", live.id())), "left: {left:?}");
    let _ = live.wait();
    // `recover LOG` still works as before.
    let mut c = command(shimlog_bin());
    c.arg("recover").arg(&dead[1].0);
    let out = run(c);
    out.assert_success("shimlog recover LOG");
    assert!(out.stdout_str().contains("nothing to recover"), "{}", out.stdout_str());
}

/// The reclaiming thread at work while the program allocates and forks (with glibc's and
/// jemalloc's fork handlers): both processes run on, their logs hold exactly their calls, and
/// the parent recovered the 8 oldest dead files (a fork child reclaims nothing).
#[test]
fn reclaiming_beside_a_fork() {
    for b in ["glibc", "jemalloc"] {
        let base = private_inflight_base();
        let logs = tempfile::tempdir().unwrap();
        let dead = dead_files(12, logs.path(), base.path());
        let out = run(canary(&["fork", "600"], logs.path(), base.path(), "", b));
        out.assert_success(&format!("{b}: crashloop fork"));
        let text = out.stdout_str();
        let child_line =
            text.lines().find(|l| l.starts_with("child ")).unwrap_or_else(|| panic!("{b}: {text}"));
        let mut w = child_line.split_whitespace();
        let child: u32 = w.nth(1).and_then(|v| v.parse().ok()).unwrap();
        let child_calls: u64 = w.nth(1).and_then(|v| v.parse().ok()).unwrap();
        for (pid, n) in [(out.pid, calls(&out)), (child, child_calls)] {
            assert_whole(&log_of(logs.path(), pid), n, b);
        }
        let left: Vec<String> = inflight_files(base.path()).into_iter().map(|f| f.0).collect();
        let newest: Vec<String> = dead[8..].iter().map(|d| d.1.clone()).collect();
        assert_eq!(left, newest, "{b}: not the 8 oldest recovered");
        for (log, _) in &dead[..8] {
            let r = LogReader::open(log.to_str().unwrap()).unwrap();
            assert!(matches!(r.ending, Ending::Recovered { .. }), "{b}: {}: {:?}", log.display(), r.ending);
        }
    }
}

/// With capture windows the removal's line is a record of the reclaiming process's watch log
/// (`shimlog stats` shows it), not a line on the program's stderr.
#[test]
fn with_a_watch_log_the_removal_is_in_it() {
    let (out, file, _base, logs) = orphan_then_start(&[("SHIM_WINDOW", "100ms")]);
    let dead_pid: u64 =
        file.rsplit('/').next().and_then(|n| n.split('-').next()).and_then(|p| p.parse().ok()).unwrap();
    assert!(!out.stderr.contains("in-flight"), "the line went to stderr:\n{}", out.stderr);
    let watch = list_files(logs.path())
        .into_iter()
        .find(|l| {
            LogReader::open(l.to_str().unwrap())
                .is_ok_and(|r| r.header.pid == out.pid && r.header.window == Some(0))
        })
        .unwrap_or_else(|| panic!("no watch log of {} in {:?}", out.pid, list_files(logs.path())));
    let j = stats(&watch);
    let removed = j["watch"]["inflight_removed"]
        .as_array()
        .unwrap_or_else(|| panic!("no watch.inflight_removed: {}", j["watch"]));
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(removed[0]["pid"], dead_pid, "{removed:?}");
    assert!(removed[0]["why"].as_str().unwrap().contains("its log is gone"), "{removed:?}");
}
