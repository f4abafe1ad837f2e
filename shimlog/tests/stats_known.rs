//! itest/programs/c/known.c captured under the real libshim.so with each backend, then `shimlog
//! stats --json` on its log: the numbers must be the ones the program counted about itself
//! (it prints them), within the few calls the C runtime adds.
//!
//! libshim.so is `$SHIM_LIB`, else `<workspace>/target/release/libshim.so` (`make` builds
//! it; `make test` builds it first).
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Calls the C runtime may make on the program's behalf (pthread_create's descriptors...).
const SLACK: u64 = 16;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn shim() -> PathBuf {
    let p = std::env::var_os("SHIM_LIB")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/release/libshim.so"));
    assert!(p.is_file(), "{} not found: build it with `make` or point SHIM_LIB at it", p.display());
    p
}

/// known.c compiled into this test's scratch directory (once per test process).
fn known() -> PathBuf {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stats-known");
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("known");
        let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args(["-O1", "-g", "-pthread", "-o"])
            .arg(&exe)
            .arg(root().join("itest/programs/c/known.c"))
            .status()
            .expect("run the C compiler");
        assert!(st.success(), "cc itest/programs/c/known.c failed");
        exe
    })
    .clone()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an unsigned number: {v}"))
}

fn check(backend: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("stats-known-{backend}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(known())
        .env("LD_PRELOAD", shim())
        .env("SHIM_BACKEND", backend)
        .env("SHIM_LOG", dir.join("known.%p.shimlog"))
        .output()
        .expect("run known");
    assert!(out.status.success(), "known under the shim: {}", String::from_utf8_lossy(&out.stderr));
    let p: Value = serde_json::from_slice(&out.stdout).expect("known prints its numbers as JSON");
    let logs: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(logs.len(), 1, "one log: {logs:?}");

    let o = Command::new(env!("CARGO_BIN_EXE_shimlog"))
        .arg("stats")
        .arg("--json")
        .arg(&logs[0])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ctx = format!("known under {backend}");

    assert_eq!(s["backend"], backend, "{ctx}");
    assert_eq!(u(&s["process"]["pid"]), u(&p["pid"]), "{ctx}");
    assert_eq!(u(&s["threads"]), u(&p["threads"]), "{ctx}: threads");
    assert_eq!(s["read"]["clean_end"], true, "{ctx}");
    assert_eq!(u(&s["unknown_frees"]), 0, "{ctx}: every free matches an allocation");
    for op in ["malloc", "calloc", "realloc", "free"] {
        let (got, want) = (u(&s["ops"][op]), u(&p["program_ops"][op]));
        assert!(got >= want && got <= want + SLACK, "{ctx}: {op} calls {got}, the program made {want}");
    }
    for op in ["malloc", "calloc", "realloc"] {
        let (got, want) = (u(&s["bytes"][op]), u(&p["program_bytes"][op]));
        assert!(got >= want && got <= want + (64 << 10), "{ctx}: {op} bytes {got}, the program asked {want}");
    }
    // The peak is reached before any thread exists; the runtime has next to nothing live.
    let (peak, want) = (u(&s["peak_live_bytes"]), u(&p["peak_live_bytes"]));
    assert!(peak >= want && peak < want + (64 << 10), "{ctx}: peak {peak}, program's {want}");

    // Cross-thread frees: thread A's 50 blocks of 2048 bytes, freed by thread B.
    let (ta, tb) = (u(&p["thread_a_tid"]), u(&p["thread_b_tid"]));
    let pairs = s["cross_thread_frees"]["top_pairs"].as_array().unwrap();
    let ab = pairs.iter().find(|x| u(&x["alloc_tid"]) == ta && u(&x["free_tid"]) == tb);
    assert_eq!(ab.map(|x| u(&x["count"])), Some(50), "{ctx}: pairs {pairs:?}");
    let cross = u(&s["cross_thread_frees"]["count"]);
    assert!((50..50 + SLACK).contains(&cross), "{ctx}: {cross} cross-thread frees");

    // Free bursts: runs of 100 and 64 frees on the main thread, and no other.
    let main = u(&p["main_tid"]);
    let b = &s["free_bursts"];
    let runs: Vec<(u64, u64)> =
        b["top"].as_array().unwrap().iter().map(|x| (u(&x["tid"]), u(&x["frees"]))).collect();
    assert_eq!(runs, vec![(main, 100), (main, 64)], "{ctx}: bursts");
    assert_eq!(
        (u(&b["count"]), u(&b["longest"]["frees"])),
        (u(&p["free_bursts"]["count"]), u(&p["free_bursts"]["longest"])),
        "{ctx}"
    );

    // Lifetimes: 1000 blocks freed with no allocation in between, 100 with exactly 10, the
    // 7 blocks of 333 bytes never freed.
    let l = &s["lifetimes"];
    let between = |n: u64| -> u64 {
        l["allocs_between"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| u(&x["from"]) == n && u(&x["to"]) == n)
            .map(|x| u(&x["blocks"]))
            .sum()
    };
    assert!(between(0) >= 1000, "{ctx}: {} blocks freed with no allocation between", between(0));
    assert!(between(10) >= 100, "{ctx}: {} blocks with 10 allocations between", between(10));
    let n333 = l["never_freed_by_size"].as_array().unwrap().iter().find(|x| u(&x["size"]) == 333);
    assert_eq!(n333.map(|x| u(&x["blocks"])), Some(7), "{ctx}: never freed {}", l["never_freed_by_size"]);
    // 20 blocks held 3 ms and 50 held 2 ms (the buckets are within 1%: count from 1 ms).
    let over_1ms: u64 = l["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| u(&x["from_ns"]) >= 1_000_000)
        .map(|x| u(&x["blocks"]))
        .sum();
    assert!(over_1ms >= u(&p["lifetimes"]["held_at_least_2ms"]), "{ctx}: {over_1ms} blocks held >= 1 ms");
}

#[test]
fn known_glibc() {
    check("glibc");
}

#[test]
fn known_jemalloc() {
    check("jemalloc");
}

#[test]
fn known_mimalloc() {
    check("mimalloc");
}
