//! itest/programs/c/counts.c under the shim with each backend: the log holds every call the program
//! made, in order, with the same arguments and results; per-operation counts match (the C
//! runtime may add a few malloc/free/calloc/realloc calls of its own, nothing else); every
//! free matches a live block; aligned results are aligned; `shimlog dump --format jsonl`
//! agrees with the reader.
use itest::*;
use recorder::{Event, Op};
use serde_json::Value;

const ROUNDS: &str = "50";

fn op_of(name: &str) -> Op {
    *Op::ALLOC_OPS.iter().find(|o| o.name() == name).unwrap_or_else(|| panic!("unknown op {name}"))
}

/// Does log event `e` record the call `c` the program printed?
fn same_call(e: &Event, c: &Value) -> bool {
    let u = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("call without {k}: {c}"));
    let op = op_of(c["op"].as_str().expect("op"));
    if e.op != op || e.ptr != u("ptr") {
        return false;
    }
    match op {
        Op::Free => true,
        Op::Calloc => e.count() == u("count") && e.size == u("size"),
        Op::Reallocarray => e.count() == u("count") && e.size == u("size") && e.old == u("old"),
        Op::Realloc => e.size == u("size") && e.old == u("old"),
        Op::PosixMemalign | Op::AlignedAlloc | Op::Memalign => e.size == u("size") && e.align() == u("align"),
        _ => e.size == u("size"),
    }
}

fn check(backend: &str) {
    let t = run_traced(backend, || {
        let mut c = command(cprog("counts"));
        c.arg(ROUNDS);
        c
    });
    t.out.assert_success("counts under the shim");
    assert!(t.out.stderr.is_empty(), "the shim wrote on stderr: {}", t.out.stderr);
    let p = t.out.json();
    assert_eq!(p["failures"], 0, "counts.c saw wrong results under {backend}");
    assert_eq!(p["usable_ok"], true, "malloc_usable_size < requested under {backend}");
    let pid = p["pid"].as_u64().expect("pid") as u32;

    let log = t.only_log();
    let calls = p["calls"].as_array().expect("calls");
    // Keep the main thread's allocation events to match the program's calls against.
    let a = analyze(&log, |e| e.tid == pid);
    a.assert_consistent(true);
    assert!(a.clean_end, "{}: no end record after a normal exit", log.display());
    assert_eq!(a.header.pid, pid);
    assert_eq!(a.header.backend, backend);
    assert!(a.header.exe.ends_with("/counts"), "header exe is {}", a.header.exe);
    assert_eq!(a.header.cmdline.last().map(String::as_str), Some(ROUNDS));

    // Per-operation counts.
    let counts = &p["counts"];
    let prog = |op: &str| counts[op].as_u64().unwrap_or_else(|| panic!("no count for {op}"));
    let free_null = p["free_null"].as_u64().expect("free_null");
    let mut ck = Checks::new();
    for op in ["malloc", "calloc", "realloc"] {
        ck.within(&format!("count of {op}"), a.count(op), prog(op), RUNTIME_SLACK);
    }
    ck.within("count of free", a.count("free"), prog("free"), free_null + RUNTIME_SLACK);
    for op in ["reallocarray", "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc"] {
        ck.eq(&format!("count of {op}"), a.count(op), prog(op));
    }

    // Every call the program made is in the log, in the program's order, on its thread.
    let mut it = a.kept.iter();
    let mut missing = 0;
    for (i, c) in calls.iter().enumerate() {
        let mut look = it.clone();
        if look.by_ref().any(|e| same_call(e, c)) {
            it = look;
        } else {
            missing += 1;
            if missing <= 3 {
                ck.failed.push(format!("call #{i} {c} is not in the log (after the calls before it)"));
            }
        }
    }
    ck.eq("calls of the program missing from the log", missing, 0);
    ck.finish(&format!("counts under {backend}"));

    // The jsonl dump says the same as the reader.
    let lines = dump_jsonl(&log);
    assert_eq!(lines.len() as u64, a.events, "dump --format jsonl printed a different number of events");
    for op in [
        "malloc",
        "free",
        "calloc",
        "realloc",
        "reallocarray",
        "posix_memalign",
        "aligned_alloc",
        "memalign",
        "valloc",
        "pvalloc",
    ] {
        let n = lines.iter().filter(|l| l["op"] == op).count() as u64;
        assert_eq!(n, a.count(op), "dump jsonl count of {op}");
    }
    for l in &lines {
        for k in ["op", "tid", "ts_ns"] {
            assert!(l.get(k).is_some(), "dump line without {k}: {l}");
        }
        let op = l["op"].as_str().unwrap_or("");
        if Op::ALLOC_OPS.iter().any(|o| o.name() == op) {
            assert!(l["ptr"].is_u64() && l["size"].is_u64(), "alloc line without ptr/size: {l}");
        }
        if matches!(op, "posix_memalign" | "aligned_alloc" | "memalign") {
            assert!(l["align"].is_u64(), "aligned op without align: {l}");
        }
        if matches!(op, "calloc" | "reallocarray") {
            assert!(l["count"].is_u64(), "{op} without count: {l}");
        }
        if matches!(op, "realloc" | "reallocarray") {
            assert!(l["old"].is_u64(), "{op} without old: {l}");
        }
    }
    // The first aligned_alloc the program made, as the dump prints it.
    let first = calls.iter().find(|c| c["op"] == "aligned_alloc").expect("an aligned_alloc call");
    assert!(
        lines.iter().any(|l| l["op"] == "aligned_alloc"
            && l["ptr"] == first["ptr"]
            && l["align"] == first["align"]
            && l["size"] == first["size"]
            && l["tid"] == pid),
        "dump has no line for {first}"
    );
}

#[test]
fn counts_glibc() {
    check("glibc");
}

#[test]
fn counts_jemalloc() {
    check("jemalloc");
}

#[test]
fn counts_mimalloc() {
    check("mimalloc");
}

#[test]
fn counts_tcmalloc() {
    check("tcmalloc");
}

#[test]
fn counts_snmalloc() {
    check("snmalloc");
}

#[test]
fn counts_rpmalloc() {
    check("rpmalloc");
}
