//! `shimlog compare` on real runs under the real shim: itest/programs/c/compare_load.c (a paced
//! service keeping LIVE_KIB live and replacing PER_MS blocks a millisecond) against itself,
//! against variants with 50% more live bytes and with twice the calls, under two backends,
//! in watch mode; and what it refuses. The runs take the lock one at a time (timings of
//! two runs sharing this machine's two CPUs would differ by that alone).
use itest::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const LIVE_KIB: u32 = 32768;
const PER_MS: u32 = 100;
const DURATION_MS: u32 = 2000;

/// compare_load under the shim with `backend`, every call timed, its log at dir/NAME.shimlog
/// (window logs: dir/NAME.N.shimlog with `env` setting windows).
fn load(
    dir: &Path,
    name: &str,
    backend: &str,
    live_kib: u32,
    per_ms: u32,
    seed: u32,
    env: &[(&str, &str)],
) -> PathBuf {
    let mut c = command(cprog("compare_load"));
    c.args([live_kib.to_string(), per_ms.to_string(), DURATION_MS.to_string(), seed.to_string()])
        .env("LD_PRELOAD", shim_lib())
        .env("SHIM_BACKEND", backend)
        .env("SHIM_TIMING", "all");
    if env.is_empty() {
        c.env("SHIM_LOG", dir.join(format!("{name}.shimlog")));
    } else {
        c.env("SHIM_LOG", dir.join(format!("{name}.%n.shimlog")));
        c.envs(env.iter().copied());
    }
    let out = run(c);
    out.assert_success(&format!("compare_load {name} on {backend}"));
    let log = if env.is_empty() {
        dir.join(format!("{name}.shimlog"))
    } else {
        dir.join(format!("{name}.0.shimlog"))
    };
    assert!(log.is_file(), "{} was not written; stderr:\n{}", log.display(), out.stderr);
    log
}

fn shimlog(args: &[&str]) -> Output {
    let mut c = command(shimlog_bin());
    c.args(args);
    run(c)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn paths(v: &[PathBuf]) -> Vec<&Path> {
    v.iter().map(|p| p.as_path()).collect()
}

/// `compare BASE --vs CAND --json` (exit 0), parsed.
fn compare_json(base: &[&Path], cand: &[&Path]) -> Value {
    let mut args: Vec<&str> = vec!["compare"];
    args.extend(base.iter().map(|p| path(p)));
    args.push("--vs");
    args.extend(cand.iter().map(|p| path(p)));
    args.push("--json");
    let out = shimlog(&args);
    out.assert_success("shimlog compare --json");
    out.json()
}

fn metric<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no metric {name} in {doc:#}"))
}

fn differs(doc: &Value, name: &str) -> bool {
    metric(doc, name)["differs"].as_bool().expect("differs")
}

/// The metric's relative interval, which must be there.
fn rel_interval(doc: &Value, name: &str) -> (f64, f64) {
    let i = &metric(doc, name)["relative_interval"];
    (i[0].as_f64().unwrap_or_else(|| panic!("{name}: no interval: {i}")), i[1].as_f64().expect("hi"))
}

fn fail_if(base: &Path, cand: &Path, expr: &str) -> Output {
    shimlog(&["compare", path(base), "--vs", path(cand), "--fail-if", expr])
}

fn exit_code(o: &Output) -> i32 {
    o.status.code().unwrap_or_else(|| panic!("killed: {}", o.status))
}

/// Refused: exit status 2, one line on stderr holding each of `words`, no report.
fn assert_refused(o: &Output, words: &[&str]) {
    assert_eq!(exit_code(o), 2, "should be refused: {}", o.stderr);
    assert_eq!(o.stderr.trim().lines().count(), 1, "one line: {}", o.stderr);
    for w in words {
        assert!(o.stderr.contains(w), "`{w}` not said: {}", o.stderr);
    }
    assert!(o.stdout.is_empty(), "no report when refused: {}", o.stdout_str());
}

#[test]
fn same_program_twice_no_difference_beyond_the_noise() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new().expect("tempdir");
    for seed in 1..=3 {
        let a = load(dir.path(), &format!("a{seed}"), "glibc", LIVE_KIB, PER_MS, seed, &[]);
        let b = load(dir.path(), &format!("b{seed}"), "glibc", LIVE_KIB, PER_MS, seed, &[]);
        let doc = compare_json(&[&a], &[&b]);
        let alarms: Vec<String> = doc["metrics"]
            .as_array()
            .expect("metrics")
            .iter()
            .filter(|m| m["differs"] == true)
            .map(|m| {
                format!(
                    "{} {} -> {} ({} .. {})",
                    m["name"],
                    m["base"],
                    m["candidate"],
                    m["relative_interval"][0],
                    m["relative_interval"][1]
                )
            })
            .collect();
        assert!(alarms.is_empty(), "seed {seed}: a false alarm on {alarms:?}");
        // One log a side: nothing is called (memory and calls need two runs a side).
        for m in ["rss_peak", "live_peak", "calls"] {
            assert_eq!(metric(&doc, m)["judged"], false, "seed {seed}, one log a side: {m} judged");
        }
        for v in doc["verdicts"].as_array().expect("verdicts") {
            let t = v["text"].as_str().expect("text");
            assert!(
                t.contains("no difference beyond the noise")
                    || t.contains("not compared")
                    || t.contains("not judged from fewer than 5 logs a side"),
                "seed {seed}: {t}"
            );
        }
        // Every metric a full log gives is compared.
        for m in [
            "alloc_p50",
            "alloc_p99",
            "alloc_p999",
            "rss_peak",
            "rss_mean",
            "live_peak",
            "stalls_per_hour",
            "calls_per_s",
        ] {
            assert!(metric(&doc, m)["not_compared"].is_null(), "seed {seed}: {m} not compared: {doc:#}");
        }
        // The text report: exit 0, one verdict line per group.
        let out = shimlog(&["compare", path(&a), "--vs", path(&b)]);
        out.assert_success("shimlog compare");
        assert_eq!(
            out.stdout_str().lines().filter(|l| l.starts_with("verdict: ")).count(),
            4,
            "{}",
            out.stdout_str()
        );
    }
    // Two runs a side, taken in turns (a machine whose load changes between the sides'
    // runs would otherwise show it as a difference): memory and calls judged, latency,
    // stalls, calls_per_s and rss_end (one sample a run) not (they need 5 logs a side), no
    // alarm.
    let mut base = Vec::new();
    let mut cand = Vec::new();
    for k in 0..2 {
        base.push(load(dir.path(), &format!("ga{k}"), "glibc", LIVE_KIB, PER_MS, 1, &[]));
        cand.push(load(dir.path(), &format!("gb{k}"), "glibc", LIVE_KIB, PER_MS, 1, &[]));
    }
    let doc = compare_json(&paths(&base), &paths(&cand));
    for m in doc["metrics"].as_array().expect("metrics").iter().filter(|m| m["not_compared"].is_null()) {
        let noisy = m["group"] == "latency"
            || ["stalls_per_hour", "stall_max", "calls_per_s", "rss_end"]
                .contains(&m["name"].as_str().unwrap());
        assert_eq!(m["judged"], !noisy, "two logs a side: {m}");
        assert_eq!(m["differs"], false, "two runs a side, a false alarm: {m}");
    }
    assert_eq!(doc["method"]["resampling"], "logs, each whole; a side of one log, its time slices");
}

#[test]
fn half_as_many_bytes_again_live_is_found() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new().expect("tempdir");
    // Two runs a side, in turns: from one log a side no memory change is called (one run
    // cannot show how much the next would differ); --fail-if below gates on one log a side.
    let (mut bases, mut mores) = (Vec::new(), Vec::new());
    for seed in 1..=2 {
        bases.push(load(dir.path(), &format!("base{seed}"), "glibc", LIVE_KIB, PER_MS, seed, &[]));
        mores.push(load(dir.path(), &format!("more{seed}"), "glibc", LIVE_KIB * 3 / 2, PER_MS, seed, &[]));
    }
    let doc = compare_json(&paths(&bases), &paths(&mores));
    let (base, more) = (bases[0].clone(), mores[0].clone());
    for m in ["live_peak", "live_mean", "rss_peak", "rss_mean"] {
        assert!(differs(&doc, m), "{m} should differ: {:#}", metric(&doc, m));
        let (lo, hi) = rel_interval(&doc, m);
        assert!(lo > 0.0, "{m}: the interval ({lo} .. {hi}) should exclude 0");
    }
    let (lo, hi) = rel_interval(&doc, "live_peak");
    assert!(lo > 0.45 && hi < 0.55, "live_peak +50%: interval {lo} .. {hi}");
    // The calls are the same: no difference there.
    for m in ["calls_per_s", "calls", "stalls_per_hour"] {
        assert!(!differs(&doc, m), "{m} should not differ: {:#}", metric(&doc, m));
    }
    let v = &doc["verdicts"].as_array().expect("verdicts")[2];
    assert!(v["text"].as_str().expect("text").contains("live_peak"), "memory verdict: {v}");

    let out = fail_if(&base, &more, "live_peak>+10%");
    assert_eq!(exit_code(&out), 1, "live_peak>+10% should fail: {}", out.stderr);
    assert!(out.stderr.contains("live_peak>+10%"), "the failing term on stderr: {}", out.stderr);
    let out = fail_if(&base, &more, "live_peak>+80%");
    assert_eq!(exit_code(&out), 0, "live_peak>+80% should pass: {}", out.stderr);
    let out = fail_if(&base, &more, "rss_peak>+10%");
    assert_eq!(exit_code(&out), 1, "rss_peak>+10% should fail: {}", out.stderr);
    assert!(out.stderr.contains("rss_peak>+10%"), "the failing term on stderr: {}", out.stderr);
    let out = fail_if(&base, &more, "rss_peak>+80%");
    assert_eq!(exit_code(&out), 0, "rss_peak>+80% should pass (about +40% more RSS): {}", out.stderr);
    let out = fail_if(&base, &more, "rss_peak>+64MiB,calls_per_s>+10%");
    assert_eq!(
        exit_code(&out),
        0,
        "16 MiB more is under +64MiB, and the calls did not change: {}",
        out.stderr
    );
    let out = fail_if(&base, &more, "rss_peak>+8MiB");
    assert_eq!(exit_code(&out), 1, "16 MiB more is over +8MiB: {}", out.stderr);
}

#[test]
fn twice_the_calls_are_found() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new().expect("tempdir");
    let (mut bases, mut busies) = (Vec::new(), Vec::new());
    for seed in 1..=2 {
        bases.push(load(dir.path(), &format!("base{seed}"), "glibc", LIVE_KIB, PER_MS, seed, &[]));
        busies.push(load(dir.path(), &format!("busy{seed}"), "glibc", LIVE_KIB, PER_MS * 2, seed, &[]));
    }
    let doc = compare_json(&paths(&bases), &paths(&busies));
    let (base, busy) = (bases[0].clone(), busies[0].clone());
    // calls_per_s is judged like latency (from 5 logs a side: the machine's load sets it
    // too), its interval all the same.
    assert!(differs(&doc, "calls"), "calls should differ: {:#}", metric(&doc, "calls"));
    for m in ["calls_per_s", "calls"] {
        let (lo, hi) = rel_interval(&doc, m);
        // Within a factor 4/3 of twice either way: the interval is taken on the ratio's
        // log scale, as wide above x2 as below it there.
        assert!(lo > 0.5 && hi < 2.0 * 4.0 / 3.0 - 1.0, "{m} about +100%: interval {lo} .. {hi}");
    }
    for m in ["live_peak", "live_mean", "rss_peak"] {
        assert!(!differs(&doc, m), "{m} should not differ: {:#}", metric(&doc, m));
    }
    assert_eq!(exit_code(&fail_if(&base, &busy, "calls_per_s>+50%")), 1);
    assert_eq!(exit_code(&fail_if(&base, &busy, "calls_per_s>+150%")), 0);
    assert_eq!(exit_code(&fail_if(&base, &busy, "live_peak>+10%,alloc_p99>+5ms")), 0);
}

#[test]
fn glibc_against_mimalloc() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new().expect("tempdir");
    let g = load(dir.path(), "glibc", "glibc", LIVE_KIB, PER_MS, 1, &[]);
    let m = load(dir.path(), "mimalloc", "mimalloc", LIVE_KIB, PER_MS, 1, &[]);
    let out = shimlog(&["compare", path(&g), "--vs", path(&m)]);
    out.assert_success("compare glibc --vs mimalloc");
    let text = out.stdout_str();
    assert!(text.contains("glibc") && text.contains("mimalloc"), "{text}");
    for row in ["alloc_p50", "alloc_p99", "rss_peak", "live_peak", "calls_per_s"] {
        assert!(
            text.lines().any(|l| l.get(1..).is_some_and(|x| x.trim_start().starts_with(row))),
            "no {row} row:\n{text}"
        );
    }
    assert_eq!(text.lines().filter(|l| l.starts_with("verdict: ")).count(), 4, "{text}");
    // The same calls, whatever serves them.
    let doc = compare_json(&[&g], &[&m]);
    assert!(!differs(&doc, "live_peak") && !differs(&doc, "calls"), "{doc:#}");
}

#[test]
fn watch_logs_compared() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new().expect("tempdir");
    let windows = [("SHIM_WINDOW", "300ms"), ("SHIM_EVERY", "1s")];
    let a = load(dir.path(), "wa", "jemalloc", LIVE_KIB, PER_MS, 1, &windows);
    let b = load(dir.path(), "wb", "jemalloc", LIVE_KIB, PER_MS, 1, &windows);
    // The watch logs alone: RSS, stalls, the allocator's statistics; no calls.
    let doc = compare_json(&[&a], &[&b]);
    for m in ["rss_peak", "rss_mean", "stalls_per_hour"] {
        assert!(metric(&doc, m)["not_compared"].is_null(), "{m}: {doc:#}");
    }
    assert!(!metric(&doc, "alloc_p50")["not_compared"].is_null(), "a watch log has no calls: {doc:#}");
    let stats: Vec<&Value> = doc["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .filter(|m| m["group"] == "allocator_stats")
        .collect();
    assert!(!stats.is_empty(), "jemalloc's statistics should be compared: {doc:#}");
    let out = shimlog(&["compare", path(&a), "--vs", path(&b)]);
    out.assert_success("compare of two watch logs");
    assert!(out.stdout_str().contains("verdict: the allocator's own statistics"), "{}", out.stdout_str());
    // Each side's watch log with its windows' logs: a group.
    let side = |name: &str| -> Vec<PathBuf> {
        list_files(dir.path())
            .into_iter()
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(name))
            .collect()
    };
    let (ga, gb) = (side("wa."), side("wb."));
    assert!(ga.len() >= 2 && gb.len() >= 2, "windows' logs: {ga:?} {gb:?}");
    let doc = compare_json(&paths(&ga), &paths(&gb));
    assert!(metric(&doc, "alloc_p50")["not_compared"].is_null(), "the windows' logs give latency: {doc:#}");
    assert!(!differs(&doc, "calls_per_s"), "{doc:#}");
}

#[test]
fn refuses_what_cannot_be_compared() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new().expect("tempdir");
    let load_log = load(dir.path(), "load", "glibc", 4096, 20, 1, &[]);
    // Another program.
    let mut c = command(cprog("idle"));
    c.args(["1000", "1"]).env("LD_PRELOAD", shim_lib()).env("SHIM_LOG", dir.path().join("idle.shimlog"));
    run(c).assert_success("idle under the shim");
    let idle = dir.path().join("idle.shimlog");
    assert_refused(
        &shimlog(&["compare", path(&load_log), "--vs", path(&idle)]),
        &["different programs", "--force"],
    );
    let out = shimlog(&["compare", path(&load_log), "--vs", path(&idle), "--force"]);
    out.assert_success("different programs with --force");

    // An unknown metric in --fail-if: one line naming the accepted ones.
    let names = [
        "live_peek",
        "alloc_p50",
        "alloc_p99",
        "alloc_p999",
        "rss_peak",
        "rss_mean",
        "live_peak",
        "stalls_per_hour",
        "calls_per_s",
    ];
    assert_refused(&fail_if(&load_log, &load_log, "live_peek>+10%"), &names);
    // A threshold in the wrong unit.
    assert_refused(&fail_if(&load_log, &load_log, "alloc_p99>+5MiB"), &["a time"]);

    // A sampled-only log against a full one, on a metric that needs every call.
    let mut c = command(cprog("compare_load"));
    c.args(["4096", "20", "1000", "1"])
        .env("LD_PRELOAD", shim_lib())
        .env("SHIM_RECORD", "sample")
        .env("SHIM_LOG", dir.path().join("sampled.shimlog"));
    run(c).assert_success("compare_load, sampled");
    let sampled = dir.path().join("sampled.shimlog");
    assert_refused(&fail_if(&sampled, &load_log, "live_peak>+10%"), &["sampled"]);
    // What both give (RSS) is still compared.
    let out = fail_if(&sampled, &load_log, "rss_peak>+1000%");
    assert_eq!(exit_code(&out), 0, "{}", out.stderr);
}

#[test]
fn call_sites_that_moved() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new().expect("tempdir");
    // One sample per 32 KiB on average (the default is 512 KiB: about 64 samples of 32 MiB,
    // an estimate 10-20% off either way, which made two runs 16 MiB apart look 1.6 MiB apart
    // in one CI run); about 1000 samples here.
    let stacks = [("SHIM_STACKS", "sample"), ("SHIM_SAMPLE_SEED", "7"), ("SHIM_SAMPLE_BYTES", "32k")];
    let run_with = |name: &str, live_kib: u32| -> PathBuf {
        let mut c = command(cprog("compare_load"));
        // Five milliseconds of replacements only: the blocks made again move from the
        // building loop's line to the replacing loop's, and over a long run the heap's peak
        // (when the short-lived block is largest) may fall after most have moved, so which
        // line holds the live bytes at the peak would depend on when it fell.
        c.args([live_kib.to_string(), PER_MS.to_string(), "5".into(), "1".into()])
            .env("LD_PRELOAD", shim_lib())
            .env("SHIM_LOG", dir.path().join(format!("{name}.shimlog")))
            .envs(stacks);
        run(c).assert_success(&format!("compare_load {name} with stacks"));
        dir.path().join(format!("{name}.shimlog"))
    };
    let (a, b) = (run_with("a", LIVE_KIB), run_with("b", LIVE_KIB * 3 / 2));
    let doc = compare_json(&[&a], &[&b]);
    let sites = &doc["sites"];
    assert_eq!(sites["estimated"], true, "{sites:#}");
    let top = &sites["live_at_peak_bytes"][0];
    assert!(top["site"].as_str().expect("site").contains("main"), "{sites:#}");
    assert!(
        top["change"].as_f64().expect("change") > 8.0 * 1024.0 * 1024.0,
        "about 16 MiB more live at main: {sites:#}"
    );
    let out = shimlog(&["compare", path(&a), "--vs", path(&b)]);
    out.assert_success("compare with stacks");
    assert!(out.stdout_str().contains("call sites that moved most"), "{}", out.stdout_str());
}
