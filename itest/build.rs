//! Compiles the C programs the integration tests run (itest/programs/c/*.c and workloads/demo.c)
//! with the system C compiler into $OUT_DIR/ctests, and tells the tests where they are
//! (ITEST_CBIN). The programs are built here, not by the Makefile, so `cargo test` alone
//! is enough.
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().expect("workspace root").to_path_buf();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("ctests");
    std::fs::create_dir_all(&out).expect("create $OUT_DIR/ctests");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());

    let mut sources: Vec<PathBuf> = std::fs::read_dir(root.join("itest/programs/c"))
        .expect("read itest/programs/c")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.push(root.join("workloads/demo.c"));
    sources.sort();
    println!("cargo:rerun-if-changed={}", root.join("itest/programs/c").display());
    println!("cargo:rerun-if-env-changed=CC");
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
        compile(&cc, src, &out);
    }
    println!("cargo:rustc-env=ITEST_CBIN={}", out.display());
}

/// A program's libraries: its ` * itest-link: -lNAME ...` line (jemalloc_walk.c links
/// Debian's libjemalloc.so.2).
fn link_args(src: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(src).unwrap_or_default();
    text.lines()
        .find_map(|l| l.trim_start_matches([' ', '*', '/']).strip_prefix("itest-link:"))
        .map(|a| a.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn compile(cc: &str, src: &Path, out: &Path) {
    let name = src.file_stem().expect("file name").to_string_lossy().into_owned();
    let exe = out.join(&name);
    let libs = link_args(src);
    let status = Command::new(cc)
        .args(["-O1", "-g", "-pthread", "-Wall", "-Wextra", "-o"])
        .arg(&exe)
        .arg(src)
        .args(&libs)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` for {}: {e}", src.display()));
    assert!(
        status.success(),
        "`{cc}` failed on {} ({status}){}",
        src.display(),
        if libs.is_empty() {
            String::new()
        } else {
            format!(", linked with {libs:?}: tools/test-deps.sh installs the libraries (libjemalloc-dev)")
        }
    );
}
