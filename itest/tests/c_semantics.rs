//! itest/programs/c/semantics.c: the return values and errno of the malloc family's edge cases
//! (overflow, bad alignments, huge sizes, realloc(p, 0), realloc(NULL, n), page alignment,
//! malloc_usable_size(NULL), free(NULL)) are the same under the shim, with every backend,
//! as without it.
use itest::*;

fn check(backend: &str) {
    let plain = run(command(cprog("semantics")));
    plain.assert_success("semantics without the shim");
    let t = run_traced(backend, || command(cprog("semantics")));
    t.out.assert_success(&format!("semantics under the shim ({backend})"));
    let (want, got) = (plain.stdout_str(), t.out.stdout_str());
    if want != got {
        let diff: Vec<String> = want
            .lines()
            .zip(got.lines())
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("without: {a}\n    with:    {b}"))
            .collect();
        panic!(
            "semantics differ under the shim with {backend} ({} lines differ, {} vs {} lines):\n    {}",
            diff.len(),
            want.lines().count(),
            got.lines().count(),
            diff.join("\n    ")
        );
    }
    assert!(t.out.stderr.is_empty(), "the shim wrote on stderr: {}", t.out.stderr);
    // The failed calls are recorded too, and the log is sound.
    let a = analyze(&t.only_log(), |_| false);
    a.assert_consistent(true);
    assert!(a.clean_end);
}

#[test]
fn semantics_glibc() {
    check("glibc");
}

#[test]
fn semantics_jemalloc() {
    check("jemalloc");
}

#[test]
fn semantics_mimalloc() {
    check("mimalloc");
}

#[test]
fn semantics_tcmalloc() {
    check("tcmalloc");
}

#[test]
fn semantics_snmalloc() {
    check("snmalloc");
}

#[test]
fn semantics_rpmalloc() {
    check("rpmalloc");
}
