// The per-thread hook state lives in C so that it can use the initial-exec TLS model: Rust's
// cdylib TLS is global-dynamic, whose __tls_get_addr can call realloc and recurse into the
// hooks (see shared/INTERPOSITION.md).
fn main() {
    // The shim's calls to its own exported functions (a patched entry point served by the
    // shim's `malloc`) bind inside the shim: through the PLT they would reach the program's
    // own `malloc` first, which is patched to come back here, for ever.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic-functions");
    println!("cargo:rerun-if-changed=src/tls.c");
    println!("cargo:rerun-if-changed=src/exec.c");
    println!("cargo:rerun-if-changed=src/patch/cxx.c");
    println!("cargo:rerun-if-changed=src/stacks/tls.c");
    // cxx.c is the glue of patched throwing `operator new`s: C++ exceptions unwind through
    // it, so it has unwind tables (-fexceptions).
    cc::Build::new()
        .file("src/tls.c")
        .file("src/exec.c")
        .file("src/patch/cxx.c")
        .file("src/stacks/tls.c")
        .opt_level(2)
        .flag("-ftls-model=initial-exec")
        .flag("-fexceptions")
        .compile("shimtls");
}
