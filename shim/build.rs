// The per-thread hook state lives in C so that it can use the initial-exec TLS model: Rust's
// cdylib TLS is global-dynamic, whose __tls_get_addr can call realloc and recurse into the
// hooks (see shared/INTERPOSITION.md).
fn main() {
    println!("cargo:rerun-if-changed=src/tls.c");
    println!("cargo:rerun-if-changed=src/exec.c");
    cc::Build::new().file("src/tls.c").file("src/exec.c").opt_level(2).flag("-ftls-model=initial-exec").compile("shimtls");
}
