//! Switched with nothing recorded (`SHIM_TRACE=0`), a program's own allocator's busiest
//! entry points jump straight to a copy of their wrapper made for the backend (patch/native.rs).
//! Each program that brings its own allocator, switched so to every backend, prints exactly
//! what it prints bare (every allocation API it has, sized frees and C++ operators included,
//! blocks from before the switch freed by their own allocator) and writes no log.
use itest::*;

/// `first`: how many lines of the output must be the same (0: all; the validator's thread
/// runtime adds a call or two to its counts from run to run, its checksum line never moves).
fn check(prog: &str, args: &[&str], first: usize) {
    let head = |s: String| if first == 0 { s } else { s.lines().take(first).collect::<Vec<_>>().join("\n") };
    let bin = ownalloc_bin(prog);
    let mut bare = command(&bin);
    bare.args(args);
    let bare = run(bare);
    bare.assert_success(&format!("{prog} bare"));
    for b in BACKENDS {
        let dir = tempfile::Builder::new().prefix("itest-native-").tempdir().expect("tempdir");
        let mut c = command(&bin);
        c.args(args)
            .env("LD_PRELOAD", shim_lib())
            .env("SHIM_BACKEND", b)
            .env("SHIM_TRACE", "0")
            .env("SHIM_LOG", dir.path().join("%e.%p.shimlog"));
        let out = run(c);
        out.assert_success(&format!("{prog} switched to {b}"));
        assert_eq!(
            head(out.stdout_str()),
            head(bare.stdout_str()),
            "{prog} switched to {b} printed otherwise than bare; stderr:\n{}",
            out.stderr
        );
        assert!(list_files(dir.path()).is_empty(), "{prog} with SHIM_TRACE=0 left a log");
    }
}

#[test]
fn validator_unprefixed_jemalloc() {
    check("validator-je", &["3000", "2"], 1);
}

#[test]
fn validator_prefixed_jemalloc() {
    check("validator-rjem", &["3000", "2"], 1);
}

#[test]
fn c_static_jemalloc() {
    check("c_static_jemalloc", &[], 0);
}

#[test]
fn c_static_jemalloc_with_blocks_from_before_the_switch() {
    check("c_static_jemalloc_ctor", &[], 0);
}

#[test]
fn c_je_prefixed_jemalloc() {
    check("c_je_prefix", &[], 0);
}

#[test]
fn cxx_static_tcmalloc() {
    check("cxx_static_tcmalloc", &[], 0);
}

#[test]
fn cxx_static_tcmalloc_with_blocks_from_before_the_switch() {
    check("cxx_static_tcmalloc_ctor", &[], 0);
}
