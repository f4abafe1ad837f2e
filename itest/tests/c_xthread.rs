//! itest/programs/c/xthread.c under the shim with each backend: 8 threads in a ring, each freeing the
//! blocks its predecessor made. The log must show every worker's mallocs on its own thread,
//! every one of its frees of a block the predecessor thread allocated, and no free of a
//! block that was not live.
use itest::*;
use std::collections::HashMap;

fn check(backend: &str) {
    let t = run_traced(backend, || {
        let mut c = command(cprog("xthread"));
        c.args(["40", "64"]);
        c
    });
    t.out.assert_success("xthread under the shim");
    let p = t.out.json();
    assert_eq!(p["bad"], 0, "xthread saw corrupted blocks under {backend}");
    let workers = p["workers"].as_array().expect("workers");
    let (lo, hi) = (
        workers.iter().map(|w| w["size_min"].as_u64().unwrap()).min().unwrap(),
        workers.iter().map(|w| w["size_max"].as_u64().unwrap()).max().unwrap(),
    );

    let log = t.only_log();
    // Keep the mallocs of the program's own sizes.
    let a = analyze(&log, |e| e.op == recorder::Op::Malloc && (lo..=hi).contains(&e.size));
    a.assert_consistent(true);
    assert!(a.clean_end, "{}: no end record", log.display());

    let mut ck = Checks::new();
    let tid_of: Vec<u32> = workers.iter().map(|w| w["tid"].as_u64().unwrap() as u32).collect();
    for t in &tid_of {
        ck.check(a.threads.contains(t), || format!("no thread_start record for worker tid {t}"));
    }
    let mut mallocs_by: HashMap<u32, u64> = HashMap::new();
    for e in &a.kept {
        *mallocs_by.entry(e.tid).or_default() += 1;
    }
    for (i, w) in workers.iter().enumerate() {
        let tid = tid_of[i];
        let prev = tid_of[w["frees_blocks_of"].as_u64().unwrap() as usize];
        let n = w["mallocs"].as_u64().unwrap();
        let (smin, smax) = (w["size_min"].as_u64().unwrap(), w["size_max"].as_u64().unwrap());
        let own = a.kept.iter().filter(|e| e.tid == tid && (smin..=smax).contains(&e.size)).count() as u64;
        ck.eq(&format!("worker {i} (tid {tid}): mallocs of its sizes"), own, n);
        ck.eq(
            &format!("worker {i}: program blocks allocated on its thread"),
            mallocs_by.get(&tid).copied().unwrap_or(0),
            n,
        );
        // Each of the worker's frees is of a block its predecessor allocated.
        let frees = a.kept_pairs.get(&(prev, tid)).copied().unwrap_or(0);
        ck.eq(
            &format!("worker {i}: frees of blocks thread {prev} made"),
            frees,
            w["frees"].as_u64().unwrap(),
        );
    }
    let cross: u64 = a.kept_pairs.iter().filter(|((x, y), _)| x != y).map(|(_, n)| n).sum();
    let same: u64 = a.kept_pairs.iter().filter(|((x, y), _)| x == y).map(|(_, n)| n).sum();
    ck.eq("program blocks freed by the thread that made them", same, 0);
    ck.eq("program blocks freed by another thread", cross, 8 * 40 * 64);
    ck.eq("program blocks live at end", a.kept_live.len(), 0);
    ck.finish(&format!("xthread under {backend}"));
}

#[test]
fn xthread_glibc() {
    check("glibc");
}

#[test]
fn xthread_jemalloc() {
    check("jemalloc");
}

#[test]
fn xthread_mimalloc() {
    check("mimalloc");
}

#[test]
fn xthread_tcmalloc() {
    check("tcmalloc");
}

#[test]
fn xthread_snmalloc() {
    check("snmalloc");
}

#[test]
fn xthread_rpmalloc() {
    check("rpmalloc");
}
