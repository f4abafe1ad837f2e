//! Backpressure: the demo workload with a deliberately slow recorder (zstd level 19).
//! SHIM_ON_FULL=block (the default) loses nothing: the log holds every call. With
//! SHIM_ON_FULL=drop threads may discard batches, but nothing is lost without being
//! counted: recorded calls plus the dropped counts equal the calls the program made.
//! Either way the program's output is what it is without the shim.
use itest::*;
use std::collections::HashMap;

const ARGS: [&str; 2] = ["4", "100000"];

fn summary(line: &str) -> HashMap<String, u64> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap_or_else(|_| panic!("bad number for {k}: {line}"))))
        .collect()
}

fn check(mode: &str) {
    let mut plain_cmd = command(cprog("demo"));
    plain_cmd.args(ARGS);
    let plain = run(plain_cmd);
    plain.assert_success("demo without the shim");
    let t = run_traced("jemalloc", || {
        let mut c = command(cprog("demo"));
        c.args(ARGS).env("SHIM_ON_FULL", mode).env("SHIM_ZSTD_LEVEL", "19");
        c
    });
    t.out.assert_success(&format!("demo with SHIM_ON_FULL={mode}"));
    assert_eq!(t.out.stdout_str(), plain.stdout_str(), "SHIM_ON_FULL={mode}: output differs");
    let s = summary(&t.out.stdout_str());
    let calls = s["allocations"] + s["frees"];

    let log = t.only_log();
    let a = analyze(&log, |_| false);
    let r = recorder::LogReader::open(log.to_str().unwrap()).unwrap();
    let mut dropped = 0u64;
    let mut dropped_on: HashMap<u32, u64> = HashMap::new();
    for e in r.events().filter(|e| e.op == recorder::Op::Dropped) {
        dropped += e.value();
        *dropped_on.entry(e.tid).or_default() += e.value();
    }
    let mut ck = Checks::new();
    ck.check(a.issues.is_empty(), || format!("read issues {:?}", a.issues));
    ck.check(a.clean_end, || "no end record".into());
    ck.eq("header on_full", a.header.on_full.as_str(), mode);
    if mode == "block" {
        ck.failed.extend(a.consistency_failures(true));
        ck.eq("events dropped with SHIM_ON_FULL=block", dropped, 0);
        ck.within("allocation-family events", a.alloc_events, calls, RUNTIME_SLACK);
    } else {
        ck.within(
            "allocation-family events recorded plus dropped",
            a.alloc_events + dropped,
            calls,
            RUNTIME_SLACK,
        );
        ck.check(dropped_on.keys().all(|t| a.threads.contains(t)), || {
            format!("dropped records on threads with no thread_start: {dropped_on:?}")
        });
    }
    ck.finish(&format!("SHIM_ON_FULL={mode} ({dropped} events dropped)"));
}

#[test]
fn block_loses_nothing() {
    check("block");
}

#[test]
fn drop_counts_everything_it_drops() {
    check("drop");
}
