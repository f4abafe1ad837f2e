//! mimalloc's public API when another backend serves a program's own mimalloc (issue 41):
//! the differential conformance of backend/src/emulate/mimalloc.rs and
//! shim/src/patch/mi_api.rs against the real mimalloc, Debian's libmimalloc.so.2.
//!
//! itest/programs/c/mimalloc_api.c (linked with -lmimalloc) calls the header's options,
//! statistics, heap, allocation and query functions and prints the shape of each answer
//! (NULL or not, usable >= asked, aligned, zeroed, owned, true/false). Bare, mimalloc answers;
//! switched to each backend, the shim does: the lines must be the same, name for name, and
//! the blocks made in heaps (sizes 4001..4099) must be in the log, with mi_heap_destroy's
//! frees when switched.
use itest::*;

fn lines(out: &Output, what: &str) -> Vec<String> {
    out.assert_success(what);
    let l: Vec<String> = out.stdout_str().lines().map(str::to_string).collect();
    assert!(l.len() > 70, "{what}: only {} answers:\n{}", l.len(), out.stdout_str());
    l
}

fn heap_sized(log: &std::path::Path) -> (usize, usize) {
    let ev = dump_jsonl(log);
    let sized = ev.iter().filter(|e| e["size"].as_u64().is_some_and(|s| (4001..=4099).contains(&s))).count();
    let frees = ev.iter().filter(|e| e["op"] == "free").count();
    (sized, frees)
}

fn check(backend: Option<&str>) {
    let prog = cprog("mimalloc_api");
    let real = lines(&run(command(&prog)), "mimalloc_api bare (Debian's mimalloc)");
    let t = run_traced_mode(backend, || command(&prog));
    let what = format!("mimalloc_api under the shim ({})", backend.unwrap_or("own"));
    let got = lines(&t.out, &what);
    let differ: Vec<String> = real
        .iter()
        .zip(&got)
        .filter(|(r, g)| r != g)
        .map(|(r, g)| format!("mimalloc: {r}\n    shim: {g}"))
        .collect();
    assert!(
        differ.is_empty() && real.len() == got.len(),
        "{what}: answers differ from mimalloc's:\n{}\nstderr:\n{}",
        differ.join("\n"),
        t.out.stderr
    );
    assert!(
        !t.out.stderr.contains("cannot switch"),
        "{what}: the shim did not switch libmimalloc:\n{}",
        t.out.stderr
    );
    let (sized, frees) = heap_sized(&t.only_log());
    assert!(sized >= 25, "{what}: only {sized} heap blocks (sizes 4001..4099) in the log");
    // In the own mode mimalloc's mi_heap_destroy frees the heap's blocks inside the library,
    // unseen; switched, the emulation frees each one through the backend and records it.
    if backend.is_some() {
        assert!(frees >= 20, "{what}: only {frees} frees in the log (mi_heap_destroy frees the heap's)");
    }
}

#[test]
fn own() {
    check(None)
}

macro_rules! per_backend {
    ($($b:ident),*) => { $(#[test] fn $b() { check(Some(stringify!($b))) })* };
}
per_backend!(glibc, jemalloc, mimalloc, tcmalloc, snmalloc, rpmalloc);
