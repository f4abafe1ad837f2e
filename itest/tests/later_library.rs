//! A library loaded with dlopen after start-up that brings an allocator of its own (here a
//! plugin defining mimalloc's entry points): the program runs as without the shim, in the
//! default mode and switched, and the shim names the library in one line on stderr, once.
//! And a library linked in at start whose allocator cannot be patched: one line, whatever
//! SHIM_BACKEND asks.
use itest::*;
use std::process::Command;

const PLUGIN_C: &str = include_str!("../programs/inline/later_plugin.c");

fn check(backend: Option<&str>) {
    let dir = tempfile::Builder::new().prefix("itest-plugin-").tempdir().expect("tempdir");
    let src = dir.path().join("plugin.c");
    let lib = dir.path().join("libplugin.so");
    std::fs::write(&src, PLUGIN_C).expect("write plugin.c");
    let mut cc = Command::new("cc");
    cc.args(["-O1", "-shared", "-fPIC", "-o"]).arg(&lib).arg(&src);
    run(cc).assert_success("cc -shared plugin.c");
    let t = run_traced_mode(backend, || {
        let mut c = command(cprog("dlopen_plugin"));
        c.arg(&lib);
        c
    });
    t.out.assert_success("dlopen_plugin");
    assert_eq!(t.out.stdout_str().trim(), "work 30000", "what the program printed");
    let lines: Vec<&str> = t.out.stderr.lines().filter(|l| l.starts_with("shim:")).collect();
    assert_eq!(lines.len(), 1, "one line from the shim expected, got {lines:?}");
    let l = lines[0];
    assert!(
        l.contains(lib.to_str().unwrap()) && l.contains("loaded after start-up") && l.contains("mimalloc"),
        "the line should name the library and its allocator: {l}"
    );
    let a = analyze(&t.only_log(), |_| false);
    a.assert_consistent(true);
    assert!(a.count("malloc") >= 30, "the program's own mallocs recorded: {:?}", a.ops);
}

#[test]
fn plugin_named_in_the_default_mode() {
    check(None);
}

#[test]
fn plugin_named_when_switched() {
    check(Some("mimalloc"));
}

/// A library linked in at start that serves the program's malloc and brings an allocator
/// family the shim cannot patch (its `mi_free` is a single `ret`, too short for a jump):
/// the program runs on the library whatever SHIM_BACKEND says, and the shim says why in
/// exactly one stderr line (the cause once: before, a switch asked for printed the patching's
/// reason and then a second line that the library could not be switched).
const BUMP_C: &str = include_str!("../programs/inline/later_bump.c");

const BUMP_MAIN_C: &str = include_str!("../programs/inline/later_bump_main.c");

#[test]
fn unpatchable_library_named_once_in_every_mode() {
    let dir = tempfile::Builder::new().prefix("itest-bumplib-").tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("bump.c"), BUMP_C).expect("write bump.c");
    std::fs::write(d.join("main.c"), BUMP_MAIN_C).expect("write main.c");
    let mut cc = Command::new("cc");
    // -fno-builtin: gcc would make the calloc above call calloc; -fcf-protection=none keeps
    // the empty mi_free a one-byte `ret`.
    cc.args(["-O2", "-fno-builtin", "-fcf-protection=none", "-shared", "-fPIC", "-o"])
        .arg(d.join("libbump.so"))
        .arg(d.join("bump.c"));
    run(cc).assert_success("cc -shared bump.c");
    let mut cc = Command::new("cc");
    cc.args(["-O2", "-o"]).arg(d.join("main")).arg(d.join("main.c"));
    cc.arg("-Wl,--no-as-needed").arg(format!("-L{}", d.display())).arg("-lbump");
    cc.arg(format!("-Wl,-rpath,{}", d.display()));
    run(cc).assert_success("cc main.c -lbump");
    let lib = d.join("libbump.so");
    for backend in [None, Some("own"), Some("jemalloc"), Some("mimalloc"), Some("glibc")] {
        let t = run_traced_mode(backend, || command(d.join("main")));
        t.out.assert_success(&format!("main on libbump.so, SHIM_BACKEND={backend:?}"));
        assert_eq!(
            t.out.stdout_str().trim(),
            "work 1000",
            "what the program printed, SHIM_BACKEND={backend:?}"
        );
        let lines: Vec<&str> = t.out.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(
            lines.len(),
            1,
            "SHIM_BACKEND={backend:?}: one line from the shim expected, got {lines:?}"
        );
        let l = lines[0];
        assert!(
            l.starts_with("shim: ")
                && l.contains(lib.to_str().unwrap())
                && l.contains("mi_free cannot be patched"),
            "SHIM_BACKEND={backend:?}: the line should name the library and why: {l}"
        );
    }
}
