//! Analysis at scale (issue 35): the call sites taken in the analysis' one pass equal what
//! the former second pass over the log found (`stats --two-pass-sites`, kept hidden for
//! this), on the call-site tests' programs; a log with stacks and one without give the same
//! figures apart from the sites; and the default reading (on more than one thread) gives
//! byte for byte the `stats --json` of `--one-thread`, on logs with many threads, windows,
//! forks, columnar and row frames, cut and corrupt frames.
use itest::sites::*;
use itest::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `shimlog stats --json --top 50 LOGS EXTRA`: its standard output, which must be a success.
fn stats_out(logs: &[PathBuf], extra: &[&str]) -> String {
    let mut c = command(shimlog_bin());
    c.arg("stats").args(logs).arg("--json").args(["--top", "50"]).args(extra);
    let out = run(c);
    out.assert_success(&format!("shimlog stats --json {extra:?} on {logs:?}"));
    out.stdout_str()
}

#[test]
fn one_pass_sites_equal_the_two_pass_sites() {
    // (what, program, its arguments, the shim's settings)
    type Run<'a> = (&'a str, PathBuf, Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let runs: Vec<Run> = vec![
        ("all", c_sites(false), vec![], vec![("SHIM_STACKS", "all")]),
        ("all, frame pointers", c_sites(true), vec![], vec![("SHIM_STACKS", "all"), ("SHIM_UNWIND", "fp")]),
        ("all, rust", rust_sites(false), vec![], vec![("SHIM_STACKS", "all")]),
        (
            "sample",
            c_sites(false),
            vec![],
            vec![("SHIM_STACKS", "sample"), ("SHIM_SAMPLE_BYTES", "64k"), ("SHIM_SAMPLE_SEED", "3")],
        ),
        ("slow (the default), a slow call", c_sites(false), vec!["slow"], vec![]),
        ("slow (the default), no slow call", c_sites(false), vec![], vec![]),
    ];
    for (name, prog, args, env) in runs {
        let t = traced(&prog, &args, &env);
        let log = t.only_log();
        let one = stats_out(std::slice::from_ref(&log), &[]);
        let two = stats_out(std::slice::from_ref(&log), &["--two-pass-sites"]);
        let s: Value = serde_json::from_str(&one).expect("stats --json");
        assert!(s["sites"].is_object(), "{name}: no call-site section: {one}");
        // Not two empty lists: every mode here has sites to compare.
        let lists = ["by_bytes", "slow"];
        let rows: usize = lists.iter().map(|l| s["sites"][l].as_array().map_or(0, |a| a.len())).sum();
        if name != "slow (the default), no slow call" {
            assert!(rows > 0, "{name}: no site rows: {}", s["sites"]);
        }
        assert!(
            one == two,
            "{name}: one pass and two passes differ\n--- one pass\n{one}\n--- two passes\n{two}"
        );
        // And the text report alike.
        let text = |extra: &[&str]| {
            let mut c = command(shimlog_bin());
            c.arg("stats").arg(&log).args(extra);
            let o = run(c);
            o.assert_success("shimlog stats");
            o.stdout_str()
        };
        assert_eq!(text(&[]), text(&["--two-pass-sites"]), "{name}: the text reports differ");
    }
}

/// The figures of a `stats --json` document that do not depend on timing: what a program
/// that allocates the same way on every run must show on every run.
fn deterministic(s: &Value) -> Value {
    serde_json::json!({
        "ops": s["ops"], "bytes": s["bytes"], "failed": s["failed"], "free_null": s["free_null"],
        "peak_live_bytes": s["peak_live_bytes"], "peak_live_blocks": s["peak_live_blocks"],
        "live_at_end": s["live_at_end"], "unknown_frees": s["unknown_frees"],
        "address_reuse_conflicts": s["address_reuse_conflicts"], "sizes": s["sizes"],
        "slop": s["slop"],
    })
}

#[test]
fn a_log_with_stacks_and_one_without_give_the_same_figures() {
    let prog = c_sites(false);
    let with = traced(&prog, &[], &[("SHIM_STACKS", "all")]);
    let without = traced(&prog, &[], &[("SHIM_STACKS", "off")]);
    let (lw, lo) = (with.only_log(), without.only_log());
    let sw: Value = serde_json::from_str(&stats_out(std::slice::from_ref(&lw), &[])).unwrap();
    let so: Value = serde_json::from_str(&stats_out(std::slice::from_ref(&lo), &[])).unwrap();
    assert!(
        sw["sites"]["by_bytes"].as_array().is_some_and(|a| !a.is_empty()),
        "the log with stacks has no sites"
    );
    assert!(so["sites"].is_null(), "the log without stacks has a site section: {}", so["sites"]);
    assert!(sw["ops"]["malloc"].as_u64().unwrap_or(0) > 1000, "{}", sw["ops"]);
    assert_eq!(deterministic(&sw), deterministic(&so), "stacks changed the figures");
    // And with the sites from a second pass, the same again.
    let sw2: Value = serde_json::from_str(&stats_out(&[lw], &["--two-pass-sites"])).unwrap();
    assert_eq!(deterministic(&sw2), deterministic(&so));
}

/// `stats --json` with the default reading and with `--one-thread`: byte for byte the same.
fn same_both_ways(what: &str, logs: &[PathBuf]) {
    let one = stats_out(logs, &["--one-thread"]);
    let par = stats_out(logs, &[]);
    assert!(
        one == par,
        "{what}: the default reading and --one-thread differ\n--- one thread\n{one}\n--- default\n{par}"
    );
}

fn copy_with(from: &Path, to: &Path, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut b = std::fs::read(from).expect("read log");
    edit(&mut b);
    std::fs::write(to, &b).expect("write log");
    to.to_path_buf()
}

#[test]
fn the_parallel_reader_gives_the_one_thread_figures() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Many threads, row and columnar frames.
    let mut demo_logs = Vec::new();
    for pack in ["rows", "columns"] {
        let t = run_traced("glibc", || {
            let mut c = command(cprog("demo"));
            c.args(["8", "40000"]).env("SHIM_PACK", pack);
            c
        });
        t.out.assert_success(&format!("demo 8 40000 with SHIM_PACK={pack}"));
        let log = t.only_log();
        let kept = dir.path().join(format!("demo-{pack}.shimlog"));
        std::fs::copy(&log, &kept).expect("copy log");
        same_both_ways(&format!("demo, 8 threads, SHIM_PACK={pack}"), std::slice::from_ref(&kept));
        demo_logs.push(kept);
    }
    let s: Value = serde_json::from_str(&stats_out(&demo_logs[1..], &[])).unwrap();
    assert!(s["read"]["columnar_frames"].as_u64().unwrap_or(0) > 0, "no columnar frame: {}", s["read"]);
    let s: Value = serde_json::from_str(&stats_out(&demo_logs[..1], &[])).unwrap();
    assert!(
        s["read"]["frames"].as_u64() > s["read"]["columnar_frames"].as_u64(),
        "no row frame: {}",
        s["read"]
    );
    // Both read together (a section each and their total).
    same_both_ways("two demo logs together", &demo_logs);

    // Cut inside a frame, and corrupt bytes inside frames (a header and a body).
    let base = &demo_logs[0];
    let len = std::fs::metadata(base).unwrap().len() as usize;
    let cut = copy_with(base, &dir.path().join("cut.shimlog"), |b| b.truncate(len * 3 / 5 + 7));
    let s: Value = serde_json::from_str(&stats_out(std::slice::from_ref(&cut), &[])).unwrap();
    assert!(!s["read"]["issues"].as_array().unwrap().is_empty(), "the cut log has no issue: {}", s["read"]);
    same_both_ways("a cut log", &[cut]);
    let bad = copy_with(base, &dir.path().join("corrupt.shimlog"), |b| {
        for at in [len / 3, len / 2, len * 2 / 3] {
            for x in &mut b[at..at + 48] {
                *x ^= 0x5a;
            }
        }
    });
    let s: Value = serde_json::from_str(&stats_out(std::slice::from_ref(&bad), &[])).unwrap();
    assert!(
        !s["read"]["issues"].as_array().unwrap().is_empty(),
        "the corrupt log has no issue: {}",
        s["read"]
    );
    same_both_ways("a corrupt log", &[bad]);

    // Windows: several logs of one process.
    let wdir = dir.path().join("windows");
    std::fs::create_dir(&wdir).unwrap();
    let mut c = command(cprog("windows"));
    c.arg("2.5")
        .env("LD_PRELOAD", shim_lib())
        .env("SHIM_LOG", wdir.join("w.%n.shimlog"))
        .env("SHIM_WINDOW", "1s");
    run(c).assert_success("windows.c with SHIM_WINDOW=1s");
    let mut windows: Vec<PathBuf> =
        list_files(&wdir).into_iter().filter(|p| p.to_string_lossy().ends_with(".shimlog")).collect();
    windows.sort();
    assert!(windows.len() >= 2, "want several window logs: {windows:?}");
    for w in &windows {
        same_both_ways(&format!("window {}", w.display()), std::slice::from_ref(w));
    }
    same_both_ways("the windows together", &windows);

    // Forks: a parent and its children read together.
    let t = run_traced("glibc", || command(cprog("forkexec")));
    t.out.assert_success("forkexec under the shim");
    let logs = t.logs();
    assert!(logs.len() >= 3, "want a parent's and its children's logs: {logs:?}");
    same_both_ways("forkexec's logs together", &logs);
}
