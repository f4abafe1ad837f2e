//! Allocator settings (`NAME:KEY=VALUE,...`) in `shimlog replay --backend` and in the shim's
//! SHIM_BACKEND, on itest/programs/c/decay.c: it builds 128 MiB of 64 KiB blocks, frees 15 of 16,
//! then idles 1.5 s making a small call every 10 ms, and exits with the rest live.
//! - replay, paced: `jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0` ends with far less resident
//!   than `jemalloc` (the RSS and jemalloc's own stats.resident), and reads its settings
//!   back from jemalloc (opt.dirty_decay_ms); an unknown setting: one line, exit 2;
//! - `--rounds 3` with the same backend twice (`jemalloc` and `jemalloc:narenas=...` at
//!   jemalloc's own default count, a neutral setting): medians, ranges and ties, and the
//!   decay column not tied with them on mean RSS;
//! - the shim: SHIM_BACKEND='jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0' frees the pages
//!   in the program itself (its own RSS after the idle), and the header names the settings;
//!   a bad setting: one line on stderr, the program runs on jemalloc's defaults.
use itest::*;
use recorder::LogReader;
use serde_json::Value;
use std::path::{Path, PathBuf};

const DECAY0: &str = "jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0";

fn record_decay(dir: &Path, backend: &str) -> (PathBuf, Value, String) {
    let mut c = command(cprog("decay"));
    c.env("LD_PRELOAD", shim_lib())
        .env("SHIM_BACKEND", backend)
        .env("SHIM_LOG", dir.join("d.%p.shimlog"))
        .env("SHIM_INFLIGHT_DIR", dir);
    let out = run(c);
    out.assert_success(&format!("decay.c on {backend}"));
    let logs: Vec<PathBuf> =
        list_files(dir).into_iter().filter(|p| p.extension().is_some_and(|e| e == "shimlog")).collect();
    assert_eq!(logs.len(), 1, "one log: {logs:?}");
    (logs[0].clone(), out.json(), out.stderr.clone())
}

fn replay(log: &Path, args: &[&str]) -> Output {
    let mut c = command(shimlog_bin());
    c.arg("replay").arg(log).args(args);
    run(c)
}

fn column<'a>(rep: &'a Value, label: &str) -> &'a Value {
    rep["backends"]
        .as_array()
        .expect("backends")
        .iter()
        .find(|b| b["backend"] == label)
        .unwrap_or_else(|| panic!("no column {label}: {rep}"))
}

#[test]
fn replay_decay_setting_lowers_rss_after_the_idle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _, _) = record_decay(dir.path(), "glibc");
    let out = replay(&log, &["--backend", &format!("jemalloc,{DECAY0}"), "--pace", "--json"]);
    out.assert_success("replay");
    let rep = out.json();
    let (def, zero) = (column(&rep, "jemalloc"), column(&rep, DECAY0));
    let end = |c: &Value| c["memory"]["end_rss_bytes"].as_u64().expect("end_rss_bytes");
    let resident = |c: &Value| c["allocator_stats"]["resident"].as_u64().expect("jemalloc's stats.resident");
    // 120 MiB freed: jemalloc keeps it dirty for its 10 s decay, at once purged with 0.
    assert!(end(def) > 100 << 20, "jemalloc kept {} resident at the end", end(def));
    assert!(end(zero) < 40 << 20, "{DECAY0} kept {} resident at the end", end(zero));
    assert!(
        resident(def) > 100 << 20 && resident(zero) < 40 << 20,
        "jemalloc's stats.resident: {} against {}",
        resident(def),
        resident(zero)
    );
    assert_eq!(zero["settings"]["dirty_decay_ms"], "0", "opt.dirty_decay_ms as jemalloc reports it: {zero}");
    assert_eq!(zero["settings"]["muzzy_decay_ms"], "0");
    assert!(def.get("settings").is_none(), "no settings on the plain column");
    assert_eq!(rep["options"]["rounds"], 1);
    let text = replay(&log, &["--backend", &format!("jemalloc,{DECAY0}"), "--pace"]);
    text.assert_success("replay (table)");
    let t = text.stdout_str();
    assert!(
        t.contains(DECAY0)
            && t.contains("verdict:")
            && t.contains("best mean RSS: jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0"),
        "{t}"
    );
    assert!(
        t.contains("time-driven settings: dirty_decay_ms=0"),
        "the table says what the decay setting models: {t}"
    );
}

#[test]
fn replay_refuses_an_unknown_setting_in_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _, _) = record_decay(dir.path(), "glibc");
    for (arg, want) in [
        (
            "jemalloc:dirty_decay=0",
            "jemalloc has no setting 'dirty_decay' (it knows: dirty_decay_ms, muzzy_decay_ms, narenas",
        ),
        (
            "mimalloc:purge_delay=soon",
            "mimalloc setting purge_delay=soon is not valid (accepted: a whole number from -1)",
        ),
        ("jemalloc,narenas=2", "setting 'narenas=2' comes before any backend"),
        ("snmalloc:x=1", "snmalloc has no setting 'x' (snmalloc takes no settings)"),
    ] {
        let out = replay(&log, &["--backend", arg]);
        assert_eq!(out.status.code(), Some(2), "{arg}: exit status, stderr {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{arg}: one line: {}", out.stderr);
        assert!(out.stderr.contains(want), "{arg}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{arg}: nothing on stdout");
    }
}

#[test]
fn rounds_mark_identical_columns_as_ties() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _, _) = record_decay(dir.path(), "glibc");
    // jemalloc's default arena count is 4 per CPU: the same as no setting.
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let same = format!("jemalloc:narenas={}", 4 * cpus);
    let out = replay(
        &log,
        &["--backend", &format!("jemalloc,{same}"), "--backend", DECAY0, "--pace", "--rounds", "3", "--json"],
    );
    out.assert_success("replay --rounds 3");
    let rep = out.json();
    assert_eq!(rep["options"]["rounds"], 3);
    for c in rep["backends"].as_array().expect("backends") {
        let r = &c["rounds"];
        assert_eq!(r["n"], 3, "{}", c["backend"]);
        for m in ["alloc_ns", "peak_rss_bytes", "mean_rss_bytes"] {
            let s = &r["metrics"][m];
            let (lo, med, hi) =
                (s["min"].as_f64().unwrap(), s["median"].as_f64().unwrap(), s["max"].as_f64().unwrap());
            assert!(
                lo <= med && med <= hi && s["values"].as_array().unwrap().len() == 3,
                "{} {m}: {s}",
                c["backend"]
            );
        }
    }
    assert_eq!(column(&rep, &same)["settings"]["narenas"], (4 * cpus).to_string());
    let v = &rep["verdict"];
    let ranking =
        |m: &str| v["rankings"].as_array().unwrap().iter().find(|r| r["metric"] == m).unwrap().clone();
    let tied = |m: &str, a: &str, b: &str| {
        ranking(m)["ties"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| (p[0] == a && p[1] == b) || (p[0] == b && p[1] == a))
    };
    // Same allocator, same settings in effect: the RSS over time is the same within noise.
    assert!(tied("peak_rss_bytes", "jemalloc", &same), "peak RSS: {}", ranking("peak_rss_bytes"));
    // The decay column's mean RSS is a fifth of theirs: no tie.
    assert!(
        !tied("mean_rss_bytes", "jemalloc", DECAY0) && !tied("mean_rss_bytes", &same, DECAY0),
        "mean RSS: {}",
        ranking("mean_rss_bytes")
    );
    let best: Vec<&Value> = v["best"].as_array().unwrap().iter().collect();
    assert_eq!(best.iter().find(|b| b["metric"] == "mean_rss_bytes").unwrap()["backend"], DECAY0);
    let text = replay(&log, &["--backend", &format!("jemalloc,{same}"), "--rounds", "3"]);
    text.assert_success("replay --rounds 3 (table)");
    let t = text.stdout_str();
    assert!(t.contains("over 3 rounds: median [min to max]") && t.contains("ties in "), "{t}");
}

#[test]
fn shim_applies_settings_from_shim_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, plain, err) = record_decay(dir.path(), "jemalloc");
    assert!(err.is_empty(), "stderr: {err}");
    let dir2 = tempfile::tempdir().expect("tempdir");
    let (log, zero, err) = record_decay(dir2.path(), DECAY0);
    assert!(err.is_empty(), "stderr: {err}");
    let end = |v: &Value| v["rss_end"].as_i64().expect("rss_end");
    // The program's own resident set after the idle: 120 MiB freed stays with jemalloc's
    // default decay, goes with 0.
    assert!(end(&plain) > 100 << 20, "jemalloc: {plain}");
    assert!(end(&zero) < 48 << 20, "{DECAY0}: {zero}");
    let h = LogReader::open(log.to_str().unwrap()).expect("log").header;
    assert_eq!(h.backend, "jemalloc");
    assert_eq!(h.backend_settings.as_deref(), Some("dirty_decay_ms=0,muzzy_decay_ms=0"));
}

#[test]
fn shim_refuses_a_bad_setting_in_one_line_and_runs_on_defaults() {
    for (backend, want) in [
        (
            "jemalloc:dirty_decay_ms=0,bogus=1",
            "shim: SHIM_BACKEND: jemalloc has no setting 'bogus' (it knows: dirty_decay_ms,",
        ),
        ("mimalloc:purge_delay=x", "shim: SHIM_BACKEND: mimalloc setting purge_delay=x is not valid"),
        ("glibc:tcache_count=0", "GLIBC_TUNABLES=glibc.malloc.tcache_count=0"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, out, err) = record_decay(dir.path(), backend);
        assert_eq!(err.lines().count(), 1, "{backend}: one line: {err}");
        assert!(err.contains(want) && err.contains("on its defaults"), "{backend}: {err}");
        let h = LogReader::open(log.to_str().unwrap()).expect("log").header;
        assert_eq!(h.backend, backend.split(':').next().unwrap(), "{backend}: still switched");
        assert_eq!(h.backend_settings, None, "{backend}: no settings applied");
        if backend.starts_with("jemalloc") {
            // Defaults: dirty_decay_ms=0 was not applied either.
            assert!(out["rss_end"].as_i64().unwrap() > 100 << 20, "{backend}: {out}");
        }
    }
}
