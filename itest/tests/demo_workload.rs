//! workloads/demo.c (what `make demo` runs) under the shim with each backend: the same
//! summary line as without the shim, a log whose per-operation counts match the summary,
//! whose blocks handed to other threads show up as cross-thread frees, and which is sound
//! (no address live twice, no free of a block that was not live, aligned results aligned).
use itest::*;
use std::collections::HashMap;

/// The defaults `make demo` uses.
const ARGS: [&str; 2] = ["4", "250000"];

fn summary(line: &str) -> HashMap<String, u64> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap_or_else(|_| panic!("bad number for {k}: {line}"))))
        .collect()
}

fn check(backend: &str) {
    let mut plain_cmd = command(cprog("demo"));
    plain_cmd.args(ARGS);
    let plain = run(plain_cmd);
    plain.assert_success("demo without the shim");
    let t = run_traced(backend, || {
        let mut c = command(cprog("demo"));
        c.args(ARGS);
        c
    });
    t.out.assert_success(&format!("demo under the shim with {backend}"));
    assert_eq!(t.out.stdout_str(), plain.stdout_str(), "{backend}: the summary differs");
    let s = summary(&t.out.stdout_str());
    let main_tid = t.out.pid;
    let a = analyze_opts(&t.only_log(), |e| e.tid != main_tid, false);
    let mut ck = Checks::new();
    ck.failed.extend(a.consistency_failures(true));
    ck.check(a.clean_end, || "no end record".into());
    for op in ["posix_memalign", "aligned_alloc", "memalign"] {
        ck.eq(&format!("count of {op}"), a.count(op), s[op]);
    }
    for op in ["malloc", "calloc", "realloc"] {
        ck.within(&format!("count of {op}"), a.count(op), s[op], RUNTIME_SLACK);
    }
    ck.within("count of free", a.count("free"), s["frees"], RUNTIME_SLACK);
    // Every block is freed by the end (the C runtime keeps a few of its own).
    ck.check(a.live.len() as u64 <= RUNTIME_SLACK, || format!("{} blocks live at the end", a.live.len()));
    ck.eq("worker blocks live at the end", a.kept_live.len(), 0);
    let cross: u64 = a.kept_pairs.iter().filter(|((x, y), _)| x != y).map(|(_, n)| n).sum();
    // A realloc race (see Analysis::realloc_races) attributes up to two frees to the wrong
    // owner.
    ck.within(
        "worker blocks freed by another thread",
        cross,
        s["passed_to_other_threads"],
        2 * a.realloc_races,
    );
    ck.check(a.realloc_races * 1000 <= a.count("realloc").max(1000), || {
        format!("{} realloc races in {} reallocs", a.realloc_races, a.count("realloc"))
    });
    ck.eq("threads", a.threads.len(), 5);
    ck.finish(&format!("demo under {backend}"));
}

#[test]
fn demo_glibc() {
    check("glibc");
}

#[test]
fn demo_jemalloc() {
    check("jemalloc");
}

#[test]
fn demo_mimalloc() {
    check("mimalloc");
}

#[test]
fn demo_tcmalloc() {
    check("tcmalloc");
}

#[test]
fn demo_snmalloc() {
    check("snmalloc");
}

#[test]
fn demo_rpmalloc() {
    check("rpmalloc");
}
