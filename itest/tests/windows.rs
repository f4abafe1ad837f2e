//! Capture windows and the watch log (issue #19): itest/programs/c/windows.c allocating for 5 s under
//! SHIM_WINDOW=1s SHIM_EVERY=2s leaves three window logs and a watch log; each window's log
//! decodes, holds the calls the program made in its period (within the batches at its
//! edges), and the watch log has the windows, RSS and allocator statistics between them.
//! itest/programs/c/stall.c makes one call slow on purpose (a big realloc of touched memory): it is
//! in the watch log as a stall.
use itest::*;
use recorder::{window_event, Event, LogReader, Op};
use std::path::Path;

fn events(path: &Path) -> (recorder::Header, Vec<Event>) {
    let r =
        LogReader::open(path.to_str().expect("utf-8")).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(r.issues.is_empty(), "{}: read issues {:?}", path.display(), r.issues);
    let h = r.header.clone();
    let v: Vec<Event> = r.events().collect();
    (h, v)
}

fn run_windows(dir: &Path, secs: &str, env: &[(&str, &str)]) -> Output {
    let mut c = command(cprog("windows"));
    c.arg(secs).env("LD_PRELOAD", shim_lib()).env("SHIM_LOG", dir.join("w.%n.shimlog"));
    for (k, v) in env {
        c.env(k, v);
    }
    run(c)
}

#[test]
fn three_windows_every_two_seconds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_windows(dir.path(), "5", &[("SHIM_WINDOW", "1s"), ("SHIM_EVERY", "2s")]);
    out.assert_success("windows.c with SHIM_WINDOW=1s SHIM_EVERY=2s");
    assert!(out.stderr.is_empty(), "the shim wrote on stderr: {}", out.stderr);
    let p = out.json();
    let pid = out.pid;
    let times: Vec<u64> =
        p["times"].as_array().expect("times").iter().map(|t| t.as_u64().expect("time")).collect();
    let batch = p["batch"].as_u64().expect("batch");
    let names: Vec<String> = list_files(dir.path())
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["w.0.shimlog", "w.1.shimlog", "w.2.shimlog", "w.3.shimlog"], "log files");

    // The watch log: the windows' starts and ends, RSS and allocator statistics between.
    let (wh, watch) = events(&dir.path().join("w.0.shimlog"));
    assert_eq!(wh.window, Some(0));
    assert_eq!(wh.pid, pid);
    let marks: Vec<(u64, u64, u64)> =
        watch.iter().filter(|e| e.op == Op::Window).map(|e| (e.size, e.value(), e.ts_ns)).collect();
    let starts: Vec<&(u64, u64, u64)> = marks.iter().filter(|m| m.1 < 16).collect();
    let ends: Vec<&(u64, u64, u64)> = marks.iter().filter(|m| m.1 >= 16).collect();
    assert_eq!(starts.iter().map(|m| m.0).collect::<Vec<_>>(), [1, 2, 3], "window starts {marks:?}");
    assert_eq!(ends.iter().map(|m| m.0).collect::<Vec<_>>(), [1, 2, 3], "window ends {marks:?}");
    assert!(starts.iter().all(|m| m.1 == window_event::START_SCHEDULE));
    assert_eq!(ends[0].1, window_event::END_LENGTH);
    assert_eq!(ends[1].1, window_event::END_LENGTH);
    assert!(ends[2].1 == window_event::END_LENGTH || ends[2].1 == window_event::END_EXIT, "{marks:?}");
    for (s, e) in starts.iter().zip(&ends).take(2) {
        let len = e.2 - s.2;
        assert!((900_000_000..1_300_000_000).contains(&len), "window {} lasted {len} ns", s.0);
    }
    let gap = starts[1].2 - starts[0].2;
    assert!((1_800_000_000..2_300_000_000).contains(&gap), "windows {gap} ns apart");
    // Between windows 1 and 2: RSS and allocator statistics.
    let between =
        |op: Op| watch.iter().filter(|e| e.op == op && e.ts_ns > ends[0].2 && e.ts_ns < starts[1].2).count();
    assert!(between(Op::Rss) >= 1, "no RSS record between windows 1 and 2");
    assert!(between(Op::AllocStat) >= 1, "no allocator statistics between windows 1 and 2");
    assert!(watch.iter().any(|e| e.op == Op::ThreadSeen && e.value() == pid as u64), "main thread not seen");
    assert!(!watch.iter().any(|e| e.op.is_alloc_family()), "the watch log has calls");

    // Each window: a self-contained log whose calls match the program's in its period.
    for n in 1..=3u32 {
        let path = dir.path().join(format!("w.{n}.shimlog"));
        let a = analyze(&path, |e| e.tid == pid);
        assert!(a.issues.is_empty(), "{}: {:?}", path.display(), a.issues);
        assert!(a.clean_end, "{}: no end record", path.display());
        assert_eq!(a.header.window, Some(n));
        let kept: Vec<&Event> = a.kept.iter().filter(|e| e.op.is_alloc_family()).collect();
        assert!(!kept.is_empty(), "window {n} has no calls of the main thread");
        let mono = |ts: u64| a.header.start_mono_ns + ts;
        let (s, e) = (mono(kept[0].ts_ns), mono(kept[kept.len() - 1].ts_ns));
        // Batches wholly inside [s, e], and those that overlap it.
        let mut inside = 0;
        let mut overlap = 0;
        for i in 1..times.len() {
            if times[i - 1] >= s && times[i] <= e {
                inside += 1;
            }
            if times[i] >= s && times[i - 1] <= e {
                overlap += 1;
            }
        }
        let mallocs =
            kept.iter().filter(|e| e.op == Op::Malloc && e.size >= 32 && e.size < 132).count() as u64;
        assert!(
            inside * batch <= mallocs && mallocs <= overlap * batch + batch,
            "window {n}: {mallocs} mallocs, the program made {} to {} in its period",
            inside * batch,
            overlap * batch
        );
        // Frees of blocks made before the window are counted, not errors.
        a.assert_consistent(false);
        let mut c = command(shimlog_bin());
        c.arg("stats").arg(&path);
        run(c).assert_success("shimlog stats of a window");
    }
    let mut c = command(shimlog_bin());
    c.arg("stats").arg(dir.path().join("w.0.shimlog"));
    let s = run(c);
    s.assert_success("shimlog stats of the watch log");
    assert!(s.stdout_str().contains("its length elapsed"), "stats of the watch log:\n{}", s.stdout_str());
    // Replay of a window says it is one, and runs without errors.
    let mut c = command(shimlog_bin());
    c.arg("replay").arg(dir.path().join("w.2.shimlog")).args(["--backend", "glibc"]);
    let r = run(c);
    r.assert_success("shimlog replay of window 2");
    assert!(r.stdout_str().contains("capture window 2 of the process"), "replay:\n{}", r.stdout_str());
}

#[test]
fn a_slow_call_is_a_stall_in_the_watch_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = command(cprog("stall"));
    c.env("LD_PRELOAD", shim_lib())
        .env("SHIM_BACKEND", "jemalloc")
        .env("SHIM_START", "1h")
        .env("SHIM_WINDOW", "1s")
        .env("SHIM_LOG", dir.path().join("s.%n.shimlog"));
    let out = run(c);
    out.assert_success("stall.c watched");
    assert!(out.stderr.is_empty(), "the shim wrote on stderr: {}", out.stderr);
    let tid = out.json()["tid"].as_u64().expect("tid");
    let logs = list_files(dir.path());
    assert_eq!(logs.len(), 1, "only the watch log: {logs:?}");
    let (_, watch) = events(&logs[0]);
    let stalls: Vec<&Event> = watch.iter().filter(|e| e.op == Op::Stall).collect();
    assert!(
        stalls.iter().any(|e| e.value() == tid
            && e.size == Op::Realloc as u64
            && e.backend_ns().unwrap_or(0) >= 1_000_000),
        "no realloc stall of thread {tid}: {stalls:?}"
    );
}

#[test]
fn bad_durations_say_one_line_and_run_on_defaults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_windows(dir.path(), "0.2", &[("SHIM_WINDOW", "soon")]);
    out.assert_success("windows.c with a bad SHIM_WINDOW");
    assert_eq!(out.stderr.lines().count(), 1, "stderr: {}", out.stderr);
    assert!(out.stderr.contains("SHIM_WINDOW"), "stderr: {}", out.stderr);
    // The default: one log from start to exit, no window number in its name.
    let logs = list_files(dir.path());
    assert_eq!(logs.len(), 1, "{logs:?}");
    let a = analyze(&logs[0], |_| false);
    assert_eq!(a.header.window, None);
    assert!(a.count("malloc") > 100);
}

/// SHIM_LOG_LIMIT with SHIM_LOG_FULL=stop: the window closes at the limit (exceeded by at
/// most one frame), no other opens, the watch log says so, the program is unchanged.
#[test]
fn log_limit_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = {
        let mut c = command(cprog("windows"));
        c.arg("1.5");
        run(c)
    };
    plain.assert_success("windows.c without the shim");
    // (40 KiB: a second of windows.c now takes less than 100 KiB, in columnar frames.)
    let out = run_windows(
        dir.path(),
        "1.5",
        &[("SHIM_LOG_LIMIT", "40k"), ("SHIM_WINDOW", "1s"), ("SHIM_EVERY", "1100ms")],
    );
    out.assert_success("windows.c with SHIM_LOG_LIMIT=40k");
    assert!(out.stderr.is_empty(), "the shim wrote on stderr: {}", out.stderr);
    let logs = list_files(dir.path());
    let total: u64 = logs.iter().map(|p| std::fs::metadata(p).expect("stat").len()).sum();
    assert!(total <= 40 * 1024 + 70 * 1024, "{total} bytes of logs for a 40 KiB limit: {logs:?}");
    let (_, watch) = events(&dir.path().join("w.0.shimlog"));
    let marks: Vec<(u64, u64)> =
        watch.iter().filter(|e| e.op == Op::Window).map(|e| (e.size, e.value())).collect();
    assert!(marks.contains(&(1, window_event::END_LIMIT)), "{marks:?}");
    assert!(marks.contains(&(0, window_event::LIMIT_STOP)), "{marks:?}");
    assert!(!marks.iter().any(|m| m.0 == 2), "a window opened after the limit: {marks:?}");
    let a = analyze(&dir.path().join("w.1.shimlog"), |_| false);
    assert!(a.issues.is_empty() && a.clean_end, "window 1's log: {:?}", a.issues);
}

/// SHIM_LOG_LIMIT with SHIM_LOG_FULL=rotate: the oldest windows' logs are deleted, the
/// newest kept, the total stays under the limit plus one frame.
#[test]
fn log_limit_rotate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_windows(
        dir.path(),
        "3",
        &[
            ("SHIM_LOG_LIMIT", "48k"),
            ("SHIM_LOG_FULL", "rotate"),
            ("SHIM_WINDOW", "200ms"),
            ("SHIM_EVERY", "400ms"),
        ],
    );
    out.assert_success("windows.c with SHIM_LOG_FULL=rotate");
    assert!(out.stderr.is_empty(), "the shim wrote on stderr: {}", out.stderr);
    let logs = list_files(dir.path());
    let total: u64 = logs.iter().map(|p| std::fs::metadata(p).expect("stat").len()).sum();
    assert!(total <= 48 * 1024 + 70 * 1024, "{total} bytes of logs for a 48 KiB limit: {logs:?}");
    let (_, watch) = events(&dir.path().join("w.0.shimlog"));
    let deleted: Vec<u64> = watch
        .iter()
        .filter(|e| e.op == Op::Window && e.value() == window_event::DELETED)
        .map(|e| e.size)
        .collect();
    assert!(!deleted.is_empty(), "no window log deleted");
    for n in &deleted {
        assert!(!dir.path().join(format!("w.{n}.shimlog")).exists(), "window {n}'s log still there");
    }
    let newest = watch.iter().filter(|e| e.op == Op::Window).map(|e| e.size).max().expect("windows");
    assert!(dir.path().join(format!("w.{newest}.shimlog")).exists(), "the newest window's log is gone");
}

/// Unmounts the test's tmpfs however the test ends.
struct Mount(std::path::PathBuf);
impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A full disk (a 96 KiB tmpfs; 256 KiB no longer filled up with columnar logs) under a
/// window: the window closes, the program runs on
/// watched and exits 0 with its output whole, the shim says so in one line, and the watch
/// log says when and why (the failed log is cut back to its last whole frame, which gives
/// the watch log room).
#[test]
fn a_full_disk_closes_the_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mnt = dir.path().join("full");
    std::fs::create_dir(&mnt).expect("mkdir");
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=96k", "tmpfs"])
        .arg(&mnt)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return itest::skip(
            "mount",
            "cannot mount a 96k tmpfs to fill (needs root, or CAP_SYS_ADMIN in a container)",
        );
    }
    let _m = Mount(mnt.clone());
    let out = run_windows(&mnt, "2.5", &[("SHIM_WINDOW", "1h")]);
    out.assert_success("windows.c on a full disk");
    let p = out.json();
    assert_eq!(p["batch"], 100, "the program's output: {}", out.stdout_str());
    assert!(p["times"].as_array().is_some_and(|t| t.len() > 500), "the program's output is cut");
    assert_eq!(out.stderr.lines().count(), 1, "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("w.1.shimlog failed") && out.stderr.contains("watched on"),
        "stderr: {}",
        out.stderr
    );
    let (_, watch) = events(&mnt.join("w.0.shimlog"));
    let marks: Vec<(u64, u64)> =
        watch.iter().filter(|e| e.op == Op::Window).map(|e| (e.size, e.value())).collect();
    assert_eq!(marks, [(1, window_event::START_SCHEDULE), (1, window_event::END_WRITE_ERROR)]);
    let r = LogReader::open(mnt.join("w.1.shimlog").to_str().unwrap()).expect("window 1");
    assert!(r.issues.is_empty(), "window 1's log: {:?}", r.issues);
    assert!(r.events().filter(|e| e.op == Op::Malloc).count() > 1000);
}

/// Every backend's own statistics reach the watch log under names the reader knows (code 0
/// is "unknown"), and they are that backend's: the names `shim_backend` gives it.
#[test]
fn every_backend_watch_log_has_its_statistics() {
    let runs: Vec<_> = BACKENDS
        .iter()
        .map(|&b| {
            std::thread::spawn(move || {
                let dir = tempfile::tempdir().expect("tempdir");
                let out = run_windows(
                    dir.path(),
                    "3",
                    &[("SHIM_WINDOW", "1s"), ("SHIM_EVERY", "2s"), ("SHIM_BACKEND", b)],
                );
                out.assert_success(&format!("windows.c under {b}"));
                let (h, watch) = events(&dir.path().join("w.0.shimlog"));
                assert_eq!(h.backend, b);
                let names: std::collections::BTreeSet<&str> = watch
                    .iter()
                    .filter(|e| e.op == Op::AllocStat)
                    .map(|e| recorder::alloc_stat_name(e.size))
                    .collect();
                assert!(!names.is_empty(), "{b}: no allocator statistics in the watch log");
                assert!(!names.contains("unknown"), "{b}: statistics of unknown name: {names:?}");
                let want: std::collections::BTreeSet<&str> = match b {
                    "glibc" => ["arena", "mmapped", "in_use", "free", "releasable"].into(),
                    "jemalloc" => {
                        ["allocated", "active", "resident", "mapped", "metadata", "retained"].into()
                    }
                    "mimalloc" => ["current_commit", "peak_commit", "page_faults"].into(),
                    "tcmalloc" => [
                        "allocated",
                        "heap_size",
                        "physical",
                        "pageheap_free",
                        "pageheap_unmapped",
                        "central_cache_free",
                        "transfer_cache_free",
                        "thread_cache_free",
                    ]
                    .into(),
                    "snmalloc" => ["reserved", "peak_reserved"].into(),
                    "rpmalloc" => {
                        ["mapped", "mapped_peak", "cached", "huge_alloc", "mapped_total", "unmapped_total"]
                            .into()
                    }
                    _ => unreachable!(),
                };
                assert_eq!(names, want, "{b}: statistics in the watch log");
            })
        })
        .collect();
    for r in runs {
        r.join().expect("a backend's run failed");
    }
}
