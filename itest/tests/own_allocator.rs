//! tests/c/exe_defines_malloc.c defines malloc/free/calloc/realloc in the executable itself,
//! so its calls (and libc's) resolve there and never reach the shim. Under the shim, with every
//! backend, it runs exactly as without it, and the shim says once, on one stderr line,
//! that these calls bypass it.
use itest::*;

fn check(backend: &str) {
    let plain = run(command(cprog("exe_defines_malloc")));
    plain.assert_success("exe_defines_malloc without the shim");
    let t = run_traced(backend, || command(cprog("exe_defines_malloc")));
    t.out.assert_success(&format!("exe_defines_malloc under the shim with {backend}"));
    assert_eq!(t.out.stdout_str(), plain.stdout_str(), "{backend}: output differs");
    assert_eq!(t.out.json()["own_calls"], 2000, "the program's calls did not reach its own malloc");
    let lines: Vec<&str> = t.out.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "{backend}: want one stderr line saying the executable's own malloc bypasses the shim, got {:?}",
        t.out.stderr
    );
    assert!(lines[0].contains("malloc"), "{backend}: the line does not say what is bypassed: {}", lines[0]);
}

#[test]
fn own_malloc_glibc() {
    check("glibc");
}

#[test]
fn own_malloc_jemalloc() {
    check("jemalloc");
}

#[test]
fn own_malloc_mimalloc() {
    check("mimalloc");
}
