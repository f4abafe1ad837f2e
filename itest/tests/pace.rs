//! The recorder's pace (shim/src/background/pace.rs): itest/programs/c/idle.c sleeps a second without a call,
//! and the shim's recorder must wake far less often than its busy pace (2,000 times a
//! second) meanwhile; then it makes five slow reallocs, each right after 150 ms of sleep,
//! and the watchdog must still see every one of them (the first call after a doze wakes
//! the recorder), in the log (recording) and in the watch log (between windows). And 300
//! threads at once: all recorded, and the recorder, which looks at each on every tick,
//! still dozes.
use itest::*;
use recorder::{Event, LogReader, Op};
use std::path::Path;

fn events(path: &Path) -> Vec<Event> {
    let r =
        LogReader::open(path.to_str().expect("utf-8")).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(r.issues.is_empty(), "{}: read issues {:?}", path.display(), r.issues);
    r.events().collect()
}

fn idle(dir: &Path, backend: &str, env: &[(&str, &str)]) -> serde_json::Value {
    let mut c = command(cprog("idle"));
    c.env("LD_PRELOAD", shim_lib()).env("SHIM_BACKEND", backend).env("SHIM_LOG", dir.join("i.%n.shimlog"));
    for (k, v) in env {
        c.env(k, v);
    }
    let out = run(c);
    out.assert_success(&format!("idle.c on {backend}"));
    assert!(out.stderr.is_empty(), "the shim wrote on stderr: {}", out.stderr);
    out.json()
}

/// A second without a call: the recorder wakes about ten times (each RSS sample), where
/// its busy pace would wake it 2,000 times.
#[test]
fn an_idle_program_costs_the_recorder_few_wakes() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = idle(dir.path(), backend, &[]);
        let wakes = p["idle_wakes"].as_u64().expect("idle_wakes");
        let cpu = p["idle_cpu_ns"].as_u64().expect("idle_cpu_ns");
        assert!(wakes <= 100, "{backend}: the recorder woke {wakes} times in an idle second (CPU {cpu} ns)");
        assert!(cpu < 10_000_000, "{backend}: the recorder used {cpu} ns of CPU in an idle second");
    }
}

/// Each realloc made right after a doze is a slow call: its record carries its time
/// inside the backend (the watchdog's mark), over the 1 ms stall threshold.
#[test]
fn slow_calls_after_a_doze_are_seen_while_recording() {
    for backend in ["jemalloc", "mimalloc"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = idle(dir.path(), backend, &[("SHIM_STACKS", "off")]);
        let rounds = p["rounds"].as_u64().expect("rounds") as usize;
        let logs = list_files(dir.path());
        assert_eq!(logs.len(), 1, "{backend}: one log: {logs:?}");
        let big = 384u64 << 20;
        let reallocs: Vec<Event> =
            events(&logs[0]).into_iter().filter(|e| e.op == Op::Realloc && e.size == big).collect();
        assert_eq!(reallocs.len(), rounds, "{backend}: the 384 MiB reallocs: {reallocs:?}");
        let slow = reallocs.iter().filter(|e| e.backend_ns().is_some_and(|ns| ns >= 1_000_000)).count();
        assert_eq!(slow, rounds, "{backend}: reallocs with a backend time over 1 ms: {reallocs:?}");
    }
}

/// Between windows, the same reallocs are stalls in the watch log.
#[test]
fn slow_calls_after_a_doze_are_stalls_in_the_watch_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = idle(dir.path(), "jemalloc", &[("SHIM_START", "1h"), ("SHIM_WINDOW", "1s")]);
    let tid = p["tid"].as_u64().expect("tid");
    let rounds = p["rounds"].as_u64().expect("rounds") as usize;
    let wakes = p["idle_wakes"].as_u64().expect("idle_wakes");
    assert!(wakes <= 100, "watching: the recorder woke {wakes} times in an idle second");
    let logs = list_files(dir.path());
    assert_eq!(logs.len(), 1, "only the watch log: {logs:?}");
    let stalls: Vec<Event> = events(&logs[0])
        .into_iter()
        .filter(|e| e.op == Op::Stall && e.value() == tid && e.size == Op::Realloc as u64)
        .collect();
    assert_eq!(stalls.len(), rounds, "realloc stalls of thread {tid}: {stalls:?}");
}

/// 300 threads registered at once (the registry's array grows under them, from 64 to 512):
/// every one's call is in the log, and the recorder, which looks at all of them on every
/// tick, still dozes while none calls.
#[test]
fn three_hundred_threads_are_all_recorded_and_the_recorder_still_dozes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = command(cprog("idle"));
    c.args(["0", "1", "300"]).env("LD_PRELOAD", shim_lib()).env("SHIM_LOG", dir.path().join("t.shimlog"));
    let out = run(c);
    out.assert_success("idle.c beside 300 threads");
    assert!(out.stderr.is_empty(), "the shim wrote on stderr: {}", out.stderr);
    let wakes = out.json()["wakes"].as_u64().expect("wakes");
    assert!(wakes <= 100, "the recorder woke {wakes} times in an idle second beside 300 threads");
    let ev = events(&dir.path().join("t.shimlog"));
    let mut tids: Vec<u32> =
        ev.iter().filter(|e| e.op == Op::Malloc && e.size == 16).map(|e| e.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    assert!(tids.len() >= 300, "threads with their malloc(16) in the log: {}", tids.len());
}
