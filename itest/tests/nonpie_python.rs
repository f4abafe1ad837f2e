//! Debian's /usr/bin/python3, a non-PIE executable that takes malloc's address: its `malloc`
//! in .dynsym is undefined but has a value (the "canonical PLT" entry), which dlsym and dladdr
//! both return first. Taken for a malloc of the executable's own, it was patched and the shim
//! called itself until the stack ran out (every mode, SHIM_TRACE=0 too). Under the shim in
//! the default mode, with SHIM_TRACE=0 and with each backend, with PYTHONMALLOC=malloc: the
//! script's output, and the calls in the log.
use itest::*;
use std::path::Path;
use std::process::Command;

const SCRIPT: &str = "x = [bytes(100 + i % 50) for i in range(20000)]\nprint('ok', len(x))\n";

fn python() -> Command {
    let p = Path::new("/usr/bin/python3");
    assert!(p.is_file(), "/usr/bin/python3 missing: install Debian's python3 (tools/test-deps.sh)");
    let mut c = command(p);
    c.env("PYTHONMALLOC", "malloc").args(["-c", SCRIPT]);
    c
}

#[test]
fn debian_python3_runs_and_is_recorded() {
    let mut ck = Checks::new();
    let off = run({
        let mut c = python();
        c.env("LD_PRELOAD", shim_lib()).env("SHIM_TRACE", "0");
        c
    });
    ck.check(off.status.success() && off.stdout_str().trim() == "ok 20000", || {
        format!("SHIM_TRACE=0: {} {:?} {}", off.status, off.stdout_str(), off.stderr)
    });
    let default = run_traced_mode(None, python);
    ck.check(default.out.status.success() && default.out.stdout_str().trim() == "ok 20000", || {
        format!("default: {} {:?} {}", default.out.status, default.out.stdout_str(), default.out.stderr)
    });
    for b in BACKENDS {
        let t = run_traced(b, python);
        ck.check(t.out.status.success() && t.out.stdout_str().trim() == "ok 20000", || {
            format!("{b}: {} {:?} {}", t.out.status, t.out.stdout_str(), t.out.stderr)
        });
        if t.out.status.success() {
            let a = analyze_opts(&t.only_log(), |_| false, false);
            ck.check(a.count("malloc") >= 20000, || format!("{b}: {} mallocs logged", a.count("malloc")));
        }
    }
    ck.finish("Debian's python3 under the shim");
}
