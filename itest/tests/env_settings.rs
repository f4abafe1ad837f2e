//! The shim's environment variables and the safety rules of its log file: SHIM_TRACE=0
//! writes nothing; an unknown value of any variable prints one stderr line and the program
//! runs on the default; SHIM_LOG's %e/%p and the default name; a log that cannot be created
//! leaves the program running with one stderr line; an existing file or a symlink is never
//! written through (a suffixed name is used); the log is mode 0600; SHIM_TIMING=all/none;
//! the header describes the process; every zstd level records the same calls. The variables
//! and their lines come from the settings table (`shim_config::SETTINGS`).
use itest::*;
use shim_config::{Kind, SETTINGS};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// counts.c with one round: quick, and its output says whether every call worked.
fn counts_cmd() -> Command {
    let mut c = command(cprog("counts"));
    c.arg("2");
    c
}

fn assert_counts_ok(out: &Output, what: &str) {
    out.assert_success(what);
    let p = out.json();
    assert_eq!(p["failures"], 0, "{what}: counts.c saw wrong results");
}

fn stderr_lines(out: &Output) -> Vec<&str> {
    out.stderr.lines().filter(|l| !l.trim().is_empty()).collect()
}

#[test]
fn trace_off_forwards_only_and_writes_nothing() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let mut c = counts_cmd();
        preload(&mut c, backend, dir.path());
        c.env("SHIM_TRACE", "0").current_dir(dir.path());
        let out = run(c);
        assert_counts_ok(&out, &format!("SHIM_TRACE=0 with {backend}"));
        assert!(out.stderr.is_empty(), "SHIM_TRACE=0 printed: {}", out.stderr);
        assert_eq!(list_files(dir.path()), Vec::<std::path::PathBuf>::new(), "SHIM_TRACE=0 wrote files");
    }
}

#[test]
fn unknown_values_print_one_line_and_run_on_the_default() {
    // Values at the edges, with what the line must list.
    let mut cases: Vec<(&str, &str, Vec<&str>, Option<&str>)> = vec![
        ("SHIM_BACKEND", "hoard", BACKENDS.to_vec(), None),
        ("SHIM_TRACE", "maybe", vec!["0"], None),
        ("SHIM_TIMING", "often", vec!["all", "none"], None),
        ("SHIM_ON_FULL", "explode", vec!["block", "drop"], None),
        ("SHIM_ZSTD_LEVEL", "0", vec!["1 to 19", "-1 to -7"], None),
        ("SHIM_INFLIGHT_MAX", "lots", vec!["64M", "off", "using 64M"], None),
        ("SHIM_INFLIGHT_DIR", "shm", vec!["absolute path", "/dev/shm"], None),
    ];
    // Every row of the settings table that refuses a value, given a word no setting takes:
    // the row's line, listing its words.
    for st in SETTINGS.iter().filter(|st| !st.warning.is_empty()) {
        let words = match st.kind {
            Kind::Words(w) => w.iter().map(|s| s[0]).collect(),
            _ => vec![],
        };
        cases.push((st.var, "nonsense", words, Some(st.warning)));
    }
    assert!(cases.len() >= 30, "the settings table has {} rows", SETTINGS.len());
    for (var, value, accepted, line) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut c = counts_cmd();
        preload(&mut c, "glibc", dir.path());
        c.env(var, value);
        let out = run(c);
        assert_counts_ok(&out, &format!("{var}={value}"));
        let lines = stderr_lines(&out);
        assert_eq!(lines.len(), 1, "{var}={value}: want one stderr line, got {:?}", out.stderr);
        assert!(lines[0].contains(var), "{var}={value}: the line does not name {var}: {}", lines[0]);
        for a in &accepted {
            assert!(lines[0].contains(a), "{var}={value}: the line does not list {a}: {}", lines[0]);
        }
        if let Some(line) = line {
            assert_eq!(lines[0], line, "{var}={value}: not the settings table's line");
        }
        // It still records, on the default backend.
        let a = analyze(&only_file(dir.path()), |_| false);
        assert_eq!(a.header.backend, "glibc", "{var}={value}");
        assert!(
            a.alloc_events > 0,
            "{var}={value}: nothing recorded in {} ({} events, {:?})",
            a.path.display(),
            a.events,
            a.ops
        );
    }
}

/// Every accepted zstd level, the fast negative ones included, gives a log that reads back
/// whole with the same calls, in the same order, as the default level.
#[test]
fn zstd_levels_record_the_same_calls() {
    let calls = |level: &str| {
        let dir = tempfile::tempdir().unwrap();
        let mut c = counts_cmd();
        preload(&mut c, "glibc", dir.path());
        c.env("SHIM_ZSTD_LEVEL", level);
        let out = run(c);
        assert_counts_ok(&out, &format!("SHIM_ZSTD_LEVEL={level}"));
        assert!(out.stderr.is_empty(), "SHIM_ZSTD_LEVEL={level} printed: {}", out.stderr);
        let a = analyze(&only_file(dir.path()), |e| e.op.is_alloc_family());
        assert!(a.issues.is_empty() && a.clean_end, "SHIM_ZSTD_LEVEL={level}: {:?}", a.issues);
        assert!(
            a.consistency_failures(true).is_empty(),
            "SHIM_ZSTD_LEVEL={level}: {:?}",
            a.consistency_failures(true)
        );
        a.kept.iter().map(|e| (e.op, e.size, e.count(), e.align())).collect::<Vec<_>>()
    };
    let want = calls("1");
    assert!(want.len() > 100, "counts.c made only {} calls", want.len());
    for level in ["-1", "-7", "3", "19"] {
        assert_eq!(calls(level), want, "SHIM_ZSTD_LEVEL={level} recorded other calls than level 1");
    }
}

fn only_file(dir: &std::path::Path) -> std::path::PathBuf {
    let f = list_files(dir);
    assert_eq!(f.len(), 1, "want exactly one file in {}, found {f:?}", dir.display());
    f[0].clone()
}

#[test]
fn log_name_expands_exe_and_pid_and_defaults_to_the_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = counts_cmd();
    preload(&mut c, "glibc", dir.path());
    c.env("SHIM_LOG", dir.path().join("x.%e.%p.log"));
    let out = run(c);
    assert_counts_ok(&out, "SHIM_LOG with %e and %p");
    let want = dir.path().join(format!("x.counts.{}.log", out.pid));
    assert_eq!(list_files(dir.path()), vec![want.clone()]);
    assert_eq!(analyze(&want, |_| false).header.pid, out.pid);

    // No SHIM_LOG: shim.%e.%p.shimlog in the current directory.
    let cwd = tempfile::tempdir().unwrap();
    let mut c = counts_cmd();
    preload(&mut c, "glibc", dir.path());
    c.env_remove("SHIM_LOG").current_dir(cwd.path());
    let out = run(c);
    assert_counts_ok(&out, "no SHIM_LOG");
    assert_eq!(list_files(cwd.path()), vec![cwd.path().join(format!("shim.counts.{}.shimlog", out.pid))]);
}

#[test]
fn log_in_a_missing_directory_prints_one_line_and_the_program_runs() {
    let dir = tempfile::tempdir().unwrap();
    for backend in BACKENDS {
        let mut c = counts_cmd();
        preload(&mut c, backend, dir.path());
        c.env("SHIM_LOG", dir.path().join("missing/sub/%p.shimlog"));
        let out = run(c);
        assert_counts_ok(&out, &format!("SHIM_LOG in a missing directory with {backend}"));
        let lines = stderr_lines(&out);
        assert_eq!(lines.len(), 1, "{backend}: want one stderr line, got {:?}", out.stderr);
        assert!(lines[0].contains("missing/sub"), "{backend}: the line does not name the path: {}", lines[0]);
    }
    assert!(list_files(dir.path()).is_empty() && !dir.path().join("missing").exists());
}

#[test]
fn existing_file_and_symlinks_are_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("log.shimlog"), b"precious").unwrap();
    std::fs::write(d.join("target.txt"), b"target").unwrap();
    std::os::unix::fs::symlink(d.join("target.txt"), d.join("link.shimlog")).unwrap();
    std::os::unix::fs::symlink(d.join("nothere"), d.join("dangling.shimlog")).unwrap();
    for name in ["log.shimlog", "link.shimlog", "dangling.shimlog"] {
        let mut c = counts_cmd();
        preload(&mut c, "glibc", d);
        c.env("SHIM_LOG", d.join(name));
        let out = run(c);
        assert_counts_ok(&out, &format!("SHIM_LOG={name} existing"));
        let new: Vec<_> = list_files(d)
            .into_iter()
            .filter(|p| {
                let f = p.file_name().unwrap().to_string_lossy().into_owned();
                f.starts_with(name) && f != name
            })
            .collect();
        assert_eq!(new.len(), 1, "{name}: want one new suffixed log, found {new:?}");
        let a = analyze(&new[0], |_| false);
        assert_eq!(a.header.pid, out.pid, "{name}");
        assert!(a.clean_end, "{name}: the suffixed log is incomplete");
    }
    assert_eq!(std::fs::read(d.join("log.shimlog")).unwrap(), b"precious");
    assert_eq!(std::fs::read(d.join("target.txt")).unwrap(), b"target");
    assert!(!d.join("nothere").exists(), "the dangling symlink was followed");
    assert!(std::fs::symlink_metadata(d.join("link.shimlog")).unwrap().file_type().is_symlink());
}

#[test]
fn log_is_mode_0600_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = counts_cmd();
    preload(&mut c, "glibc", dir.path());
    unsafe {
        c.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    let out = run(c);
    assert_counts_ok(&out, "umask 0");
    let log = only_file(dir.path());
    let mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600, "{} has mode {mode:o}", log.display());
}

#[test]
fn timing_all_times_every_call_and_none_times_none() {
    for backend in BACKENDS {
        for timing in ["all", "none"] {
            let t = run_traced(backend, || {
                let mut c = counts_cmd();
                c.env("SHIM_TIMING", timing);
                c
            });
            assert_counts_ok(&t.out, &format!("SHIM_TIMING={timing}"));
            let a = analyze(&t.only_log(), |_| false);
            a.assert_consistent(true);
            assert_eq!(a.header.timing, timing, "header timing");
            assert!(
                a.alloc_events > 100,
                "{backend} SHIM_TIMING={timing}: {} allocation events in {}",
                a.alloc_events,
                a.path.display()
            );
            if timing == "all" {
                assert_eq!(a.timed, a.alloc_events, "{backend}: SHIM_TIMING=all left calls untimed");
            } else {
                // Only a call stuck in the backend for over 1 ms may still carry a time.
                assert!(
                    a.timed <= 2,
                    "{backend}: SHIM_TIMING=none timed {} of {} calls",
                    a.timed,
                    a.alloc_events
                );
            }
        }
    }
}

#[test]
fn header_describes_the_process() {
    let before =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    for backend in BACKENDS {
        let t = run_traced(backend, counts_cmd);
        assert_counts_ok(&t.out, "counts");
        let h = analyze(&t.only_log(), |_| false).header;
        assert_eq!(h.format_version, recorder::format::VERSION);
        assert_eq!(h.pid, t.out.pid);
        assert_eq!(h.ppid, std::process::id(), "ppid is the test process");
        assert!(!h.forked);
        assert_eq!(std::path::PathBuf::from(&h.exe), cprog("counts").canonicalize().unwrap());
        assert_eq!(h.cmdline, vec![cprog("counts").to_string_lossy().into_owned(), "2".to_string()]);
        assert_eq!(h.backend, backend);
        assert!(!h.backend_version.is_empty(), "{backend}: no backend version");
        assert_eq!(h.page_size, unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64);
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        assert!(
            h.start_unix_ns >= before - 1_000_000_000 && h.start_unix_ns <= now,
            "start time {}",
            h.start_unix_ns
        );
        assert!(!h.clock.is_empty() && h.ticks_per_sec > 0.0, "{backend}: clock in header: {h:?}");
        assert_eq!(h.on_full, "block");
    }
}
