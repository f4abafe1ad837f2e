//! Helpers of the call-site tests (tests/stacks.rs, tests/sampled.rs): itest/programs/c/sites.c and
//! itest/programs/rust/sites.rs built with the frames kept, runs under the shim, and `shimlog stats
//! --json`'s site lists.
use crate::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const B_BYTES: u64 = 1000 * 4096;
pub const C_BYTES: u64 = 500 * 10000;

/// A build directory for the programs these tests compile, kept under target/.
pub fn build_dir() -> PathBuf {
    let d = workspace_root().join("target/stacks-tests");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `src` with `cmd` + `args` into target/stacks-tests/`name`, once per source change.
pub fn build(name: &str, src: &Path, cmd: &str, args: &[&str]) -> PathBuf {
    // One build at a time: the tests run in parallel and share the programs.
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let out = build_dir().join(name);
    let fresh = match (std::fs::metadata(&out), std::fs::metadata(src)) {
        (Ok(o), Ok(s)) => o.modified().unwrap() >= s.modified().unwrap(),
        _ => false,
    };
    if !fresh {
        let tmp = out.with_extension(format!("tmp{}", std::process::id()));
        let st = Command::new(cmd).args(args).arg("-o").arg(&tmp).arg(src).status().expect(cmd);
        assert!(st.success(), "{cmd} {args:?} {} failed", src.display());
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

pub fn c_sites(fp: bool) -> PathBuf {
    let src = workspace_root().join("itest/programs/c/sites.c");
    let mut args = vec!["-O2", "-g", "-fno-inline", "-fno-optimize-sibling-calls"];
    if fp {
        args.push("-fno-omit-frame-pointer");
    }
    build(if fp { "sites-c-fp" } else { "sites-c" }, &src, "cc", &args)
}

pub fn rust_sites(fp: bool) -> PathBuf {
    let src = workspace_root().join("itest/programs/rust/sites.rs");
    let mut args = vec!["-C", "opt-level=3", "-C", "debuginfo=1", "--edition", "2021"];
    if fp {
        args.extend(["-C", "force-frame-pointers=yes"]);
    }
    build(if fp { "sites-rs-fp" } else { "sites-rs" }, &src, "rustc", &args)
}

/// Runs `prog args` under the shim with `env`, returns the run (one log).
pub fn traced(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Traced {
    let t = run_traced("glibc", || {
        let mut c = command(prog);
        c.args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c
    });
    t.out.assert_success(&format!("{} under the shim", prog.display()));
    t
}

pub fn stats(log: &Path) -> Value {
    let mut c = command(shimlog_bin());
    c.arg("stats").arg(log).arg("--json").args(["--top", "50"]);
    let out = run(c);
    out.assert_success("shimlog stats --json");
    out.json()
}

/// The row of `list` whose function is `name` (or ends with `::name`, a Rust path).
pub fn row<'a>(s: &'a Value, list: &str, name: &str) -> Option<&'a Value> {
    s["sites"][list].as_array()?.iter().find(|r| {
        let f = r["function"].as_str().unwrap_or("");
        f == name || f.ends_with(&format!("::{name}"))
    })
}

pub fn val(s: &Value, list: &str, name: &str, field: &str) -> u64 {
    row(s, list, name).map(|r| r[field].as_u64().unwrap()).unwrap_or_else(|| {
        panic!("no site {name} in sites.{list}: {}", serde_json::to_string_pretty(&s["sites"]).unwrap())
    })
}
