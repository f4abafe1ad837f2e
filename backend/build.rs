// gperftools' tcmalloc comes from Debian's static libtcmalloc_minimal.a
// (libgoogle-perftools-dev). That archive defines malloc, free, operator new, mmap, sbrk,
// __libc_malloc and the rest, which must never interpose the program's: it is copied into
// OUT_DIR with every plain-C name and every operator new/delete it defines renamed to
// `shimtc_<name>` (objcopy --redefine-syms renames definitions and references alike, so the
// archive's calls to its own malloc stay its own). Without the archive or objcopy the
// backend is left out (cfg `shim_tcmalloc` unset) and SHIM_BACKEND=tcmalloc is refused.
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(shim_tcmalloc)");
    println!("cargo:rerun-if-env-changed=SHIM_TCMALLOC_A");
    let Some(archive) = find_archive() else {
        println!("cargo:warning=libtcmalloc_minimal.a not found (Debian: libgoogle-perftools-dev): no tcmalloc backend");
        return;
    };
    println!("cargo:rerun-if-changed={}", archive.display());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=src/tcmalloc/no_eh_pool.c");
    match private_copy(&archive, &out) {
        Ok(()) => {
            cc::Build::new().file("src/tcmalloc/no_eh_pool.c").cargo_metadata(false).compile("shimtcglue");
            println!("cargo:rustc-link-search=native={}", out.display());
            println!("cargo:rustc-link-lib=static=shimtcmalloc");
            println!("cargo:rustc-link-lib=static=shimtcglue");
            println!("cargo:rustc-link-lib=static=shimtcinit");
            // libstdc++ statically (Debian's libstdc++.a is PIC), its symbols local to the
            // shim like the rest: see src/tcmalloc/no_eh_pool.c.
            if let Some(dir) = gcc_file("libstdc++.a").and_then(|p| p.parent().map(Path::to_path_buf)) {
                println!("cargo:rustc-link-search=native={}", dir.display());
            }
            println!("cargo:rustc-link-lib=static=stdc++");
            println!("cargo:rustc-cfg=shim_tcmalloc");
        }
        Err(e) => {
            println!("cargo:warning=cannot make the private tcmalloc archive: {e}; no tcmalloc backend")
        }
    }
}

fn find_archive() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SHIM_TCMALLOC_A") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    gcc_file("libtcmalloc_minimal.a")
}

/// Where the compiler finds library `name`.
fn gcc_file(name: &str) -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let o = Command::new(cc).arg(format!("-print-file-name={name}")).output().ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    // gcc prints the bare name back when it finds nothing.
    (p.is_absolute() && p.is_file()).then_some(p)
}

/// The names to rename: the defined global symbols that are C names or operator new/delete.
fn renames(archive: &Path) -> Result<Vec<String>, String> {
    let o = Command::new("nm")
        .args(["-g", "--defined-only", "--format=posix"])
        .arg(archive)
        .output()
        .map_err(|e| format!("nm: {e}"))?;
    if !o.status.success() {
        return Err(format!("nm failed on {}", archive.display()));
    }
    let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| !n.ends_with(':') && !n.starts_with("DW.ref."))
        .filter(|n| {
            !n.starts_with("_Z")
                || n.starts_with("_Znw")
                || n.starts_with("_Zna")
                || n.starts_with("_Zdl")
                || n.starts_with("_Zda")
        })
        .map(str::to_string)
        .collect();
    v.sort();
    v.dedup();
    if !v.iter().any(|n| n == "malloc") || !v.iter().any(|n| n == "tc_malloc") {
        return Err(format!("{} does not define malloc and tc_malloc", archive.display()));
    }
    Ok(v)
}

fn private_copy(archive: &Path, out: &Path) -> Result<(), String> {
    let names = renames(archive)?;
    let map = out.join("tcmalloc.redefine");
    let text: String = names.iter().map(|n| format!("{n} shimtc_{n}\n")).collect();
    std::fs::write(&map, text).map_err(|e| e.to_string())?;
    let dst = out.join("libshimtcmalloc.a");
    let st = Command::new("objcopy")
        .arg(format!("--redefine-syms={}", map.display()))
        .arg(archive)
        .arg(&dst)
        .status()
        .map_err(|e| format!("objcopy: {e}"))?;
    if !st.success() {
        return Err("objcopy failed".into());
    }
    defer_static_init(&dst, out)
}

/// The archive's static initialisers (flags from the environment, and malloc_extension.cc's
/// and tcmalloc.cc's, which set tcmalloc up with a first allocation: about 4 MiB of RSS)
/// would run in every process under the shim, whatever its backend. Each member's
/// `.init_array` is dropped and its initialiser renamed `shimtc_init_N`; the generated
/// `shimtc_static_init` calls them in archive order, and the backend calls it when tcmalloc
/// is first used.
fn defer_static_init(archive: &Path, out: &Path) -> Result<(), String> {
    let dir = out.join("tcmember");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let run = |c: &mut Command| -> Result<std::process::Output, String> {
        let o = c.output().map_err(|e| format!("{c:?}: {e}"))?;
        if o.status.success() {
            Ok(o)
        } else {
            Err(format!("{c:?}: {}", String::from_utf8_lossy(&o.stderr)))
        }
    };
    let members = run(Command::new("ar").arg("t").arg(archive))?;
    let mut calls = String::new();
    let mut n = 0;
    for member in String::from_utf8_lossy(&members.stdout).lines() {
        run(Command::new("ar").current_dir(&dir).arg("x").arg(archive).arg(member))?;
        let obj = dir.join(member);
        let syms = run(Command::new("nm").arg(&obj))?;
        let inits: Vec<String> = String::from_utf8_lossy(&syms.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2))
            .filter(|n| n.starts_with("_GLOBAL__sub_I_"))
            .map(str::to_string)
            .collect();
        if inits.is_empty() {
            continue;
        }
        let mut c = Command::new("objcopy");
        c.arg("--remove-section=.init_array");
        for init in &inits {
            // objcopy renames first: globalize the new name.
            c.arg(format!("--redefine-sym={init}=shimtc_init_{n}"))
                .arg(format!("--globalize-symbol=shimtc_init_{n}"));
            calls.push_str(&format!("    extern void shimtc_init_{n}(void);\n    shimtc_init_{n}();\n"));
            n += 1;
        }
        run(c.arg(&obj))?;
        run(Command::new("ar").arg("r").arg(archive).arg(&obj))?;
    }
    let src = out.join("tcinit.c");
    std::fs::write(
        &src,
        format!("/* Generated by backend/build.rs. */\nvoid shimtc_static_init(void) {{\n{calls}}}\n"),
    )
    .map_err(|e| e.to_string())?;
    cc::Build::new().file(&src).cargo_metadata(false).compile("shimtcinit");
    Ok(())
}
