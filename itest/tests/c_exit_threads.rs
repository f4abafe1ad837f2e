//! itest/programs/c/exit_threads.c under the shim with each backend: the program ends (return from
//! main, exit(), or SIGKILL) while 4 threads are still allocating. The log decodes and holds
//! the main thread's known calls; after a normal end it is complete (end record); after
//! SIGKILL it is readable up to its last written frame, which includes the main thread's
//! calls since it kept allocating for 1.5 s (partial buffers are written at least once a
//! second).
use itest::*;
use recorder::Op;
use std::os::unix::process::ExitStatusExt;

fn check(backend: &str, mode: &str) {
    let t = run_traced(backend, || {
        let mut c = command(cprog("exit_threads"));
        c.arg(mode);
        c
    });
    if mode == "kill" {
        assert_eq!(t.out.status.signal(), Some(libc::SIGKILL), "exit_threads kill: {}", t.out.stderr);
    } else {
        t.out.assert_success(&format!("exit_threads {mode}"));
    }
    let p = t.out.json();
    let main_tid = p["main_tid"].as_u64().unwrap() as u32;
    let log = t.only_log();
    let a = analyze(&log, |e| e.tid == main_tid && e.op == Op::Malloc && (8001..=8002).contains(&e.size));
    let mut ck = Checks::new();
    ck.check(a.double_live == 0, || format!("address live twice: {:?}", a.double_examples));
    ck.check(a.unmatched_frees == 0, || format!("unmatched frees: {:?}", a.unmatched_examples));
    let n8001 = a.kept.iter().filter(|e| e.size == 8001).count();
    ck.eq("main thread's mallocs of 8001", n8001, 10);
    let workers = a.threads.iter().filter(|t| **t != main_tid).count();
    ck.eq("threads besides main in the log", workers, 4);
    let worker_events = a.alloc_events - a.kept.len() as u64;
    ck.check(worker_events > 0, || "no allocation events from the worker threads".into());
    if mode == "kill" {
        // Cut off by SIGKILL: a truncated last frame is allowed, nothing else.
        let bad: Vec<&String> = a.issues.iter().filter(|i| !i.contains("cut off")).collect();
        ck.check(bad.is_empty(), || format!("read issues besides truncation: {bad:?}"));
        let n8002 = a.kept.iter().filter(|e| e.size == 8002).count();
        ck.check(n8002 > 0, || {
            "none of the main thread's 8002-byte mallocs of the last 1.5 s reached the log".into()
        });
    } else {
        ck.check(a.issues.is_empty(), || format!("read issues: {:?}", a.issues));
        ck.check(a.clean_end, || "no end record after a normal exit".into());
    }
    ck.finish(&format!("exit_threads {mode} under {backend}"));
}

#[test]
fn return_glibc() {
    check("glibc", "return");
}
#[test]
fn return_jemalloc() {
    check("jemalloc", "return");
}
#[test]
fn return_mimalloc() {
    check("mimalloc", "return");
}
#[test]
fn return_tcmalloc() {
    check("tcmalloc", "return");
}
#[test]
fn return_snmalloc() {
    check("snmalloc", "return");
}
#[test]
fn return_rpmalloc() {
    check("rpmalloc", "return");
}
#[test]
fn exit_glibc() {
    check("glibc", "exit");
}
#[test]
fn exit_jemalloc() {
    check("jemalloc", "exit");
}
#[test]
fn exit_mimalloc() {
    check("mimalloc", "exit");
}
#[test]
fn exit_tcmalloc() {
    check("tcmalloc", "exit");
}
#[test]
fn exit_snmalloc() {
    check("snmalloc", "exit");
}
#[test]
fn exit_rpmalloc() {
    check("rpmalloc", "exit");
}
#[test]
fn kill_glibc() {
    check("glibc", "kill");
}
#[test]
fn kill_jemalloc() {
    check("jemalloc", "kill");
}
#[test]
fn kill_mimalloc() {
    check("mimalloc", "kill");
}
#[test]
fn kill_tcmalloc() {
    check("tcmalloc", "kill");
}
#[test]
fn kill_snmalloc() {
    check("snmalloc", "kill");
}
#[test]
fn kill_rpmalloc() {
    check("rpmalloc", "kill");
}
