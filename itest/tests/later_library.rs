//! A library loaded with dlopen after start-up that brings an allocator of its own (here a
//! plugin defining mimalloc's entry points): the program runs as without the shim, in the
//! default mode and switched, and the shim names the library in one line on stderr, once.
use itest::*;
use std::process::Command;

const PLUGIN_C: &str = r#"#include <stddef.h>
#include <stdlib.h>
void *mi_malloc(size_t n) { return malloc(n); }
void mi_free(void *p) { free(p); }
size_t plugin_work(void) {
    size_t n = 0;
    for (int i = 0; i < 1000; i++) { void *p = mi_malloc(64); n += p != 0; mi_free(p); }
    return n;
}
"#;

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
