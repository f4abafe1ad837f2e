//! Edge cases of a process's life under the shim: thousands of short-lived threads (their
//! state is reclaimed), and a call that stays long inside the allocator (recorded with its
//! time even when SHIM_TIMING=none, found by the recorder's watchdog).
use itest::*;

#[test]
fn short_lived_threads_are_all_recorded_and_reclaimed() {
    let n = 3000u64;
    let mut bare = command(cprog("short_threads"));
    bare.arg(n.to_string());
    let bare = run(bare);
    bare.assert_success("short_threads without the shim");
    let bare_hwm = bare.json()["vmhwm_kb"].as_u64().unwrap();
    for backend in BACKENDS {
        let t = run_traced(backend, || {
            let mut c = command(cprog("short_threads"));
            c.arg(n.to_string());
            c
        });
        t.out.assert_success(&format!("short_threads under {backend}"));
        let hwm = t.out.json()["vmhwm_kb"].as_u64().unwrap();
        // 3000 threads x (a 64 KiB buffer + state) would be ~200 MiB if nothing were
        // reclaimed; allow the pool, zstd and the backend's own arenas.
        assert!(
            hwm < bare_hwm + 48 * 1024,
            "{backend}: peak RSS {hwm} kB with the shim vs {bare_hwm} kB without: thread state is not reclaimed"
        );
        let a = analyze(&t.only_log(), |_| true);
        let mut c = Checks::new();
        c.within("thread_start", a.count("thread_start"), n + 1, 0);
        c.within("thread_exit", a.count("thread_exit"), n, 0);
        c.within("malloc", a.count("malloc"), n * 20, RUNTIME_SLACK);
        c.within("free", a.count("free"), n * 20, RUNTIME_SLACK);
        c.finish(backend);
        a.assert_consistent(true);
    }
}

#[test]
fn a_slow_call_is_timed_even_when_timing_is_off() {
    let t = run_traced("glibc", || {
        let mut c = command(cprog("slow_call"));
        c.env("SHIM_TIMING", "none").env("MALLOC_PERTURB_", "165");
        c
    });
    t.out.assert_success("slow_call");
    let big = t.out.json()["big"].as_u64().unwrap();
    let events = dump_jsonl(&t.only_log());
    let slow: Vec<_> = events.iter().filter(|e| e["op"] == "malloc" && e["size"] == big).collect();
    assert_eq!(slow.len(), 1, "the big malloc is in the log once");
    let ns = slow[0]["backend_ns"].as_u64();
    assert!(
        ns.is_some_and(|ns| ns >= 500_000),
        "the 256 MiB perturbed malloc has no backend time of at least 0.5 ms: {:?}",
        slow[0]
    );
    let timed_small = events
        .iter()
        .filter(|e| e["op"] == "malloc" && e["size"] == 64 && e.get("backend_ns").is_some())
        .count();
    assert_eq!(timed_small, 0, "SHIM_TIMING=none timed fast calls");
}

#[test]
fn heap_introspection_is_answered_by_the_backend_in_use() {
    let want = 256u64 * 64 * 1024;
    for backend in BACKENDS {
        let t = run_traced(backend, || command(cprog("introspect")));
        t.out.assert_success(&format!("introspect under {backend}"));
        let j = t.out.json();
        let in_use = j["in_use"].as_u64().unwrap();
        // glibc serves 64 KiB blocks from its heap (uordblks counts them); jemalloc counts
        // allocated bytes, mimalloc committed ones, tcmalloc allocated bytes, snmalloc bytes
        // reserved, rpmalloc mapped less cached: all at least what is live.
        assert!(in_use >= want, "{backend}: mallinfo2 says {in_use} bytes in use, {want} are live");
        assert!(j["mallinfo_in_use"].as_i64().unwrap() as u64 >= want, "{backend}: mallinfo: {j}");
        // snmalloc and rpmalloc have no call that returns memory: malloc_trim says it released
        // nothing (0), as glibc's does when it had nothing to release.
        let trims = !matches!(backend, "snmalloc" | "rpmalloc");
        assert_eq!(j["trim"], trims as u64, "{backend}: malloc_trim: {j}");
    }
}

#[test]
fn a_non_pie_executable_is_not_taken_for_one_with_its_own_malloc() {
    // A non-PIE executable's undefined malloc has its PLT stub's address, which is what
    // dlsym returns: it must not be reported as a malloc of its own. Debian's python3.11
    // is such an executable; build one when it is not there.
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("nopie");
    let src = dir.path().join("nopie.c");
    std::fs::write(&src, include_str!("../programs/inline/nopie.c")).unwrap();
    let st = std::process::Command::new("cc")
        .args(["-O1", "-no-pie", "-fno-pie", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "cc -no-pie failed");
    let t = run_traced("glibc", || command(&exe));
    t.out.assert_success("nopie");
    assert_eq!(t.out.stdout_str().trim(), "ok");
    assert!(!t.out.stderr.contains("own malloc"), "false alarm on a non-PIE executable: {}", t.out.stderr);
    let a = analyze(&t.only_log(), |_| true);
    assert!(a.count("malloc") >= 1, "the non-PIE program's malloc was not recorded");
}
