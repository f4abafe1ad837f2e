//! A program that closes every descriptor it did not open and fills the numbers with its own
//! pipe (itest/programs/c/closefds.c), through the C library (close over /proc/self/fd,
//! dup2; closefrom, dup3) and past it (the close_range and dup3 system calls), in a parent, a
//! forked child and an exec'd image, under the shim with each backend: the pipe carries
//! exactly what the program wrote through it, every process has a log that reads and holds
//! its calls, and the shim said nothing about a failed write.
use itest::*;

fn check(mode: &str, backend: &str) {
    let t = run_traced(backend, || {
        let mut c = command(cprog("closefds"));
        c.arg(mode);
        c
    });
    let what = format!("closefds {mode} under the shim ({backend})");
    t.out.assert_success(&what);
    let lines = t.out.json_lines();
    let mut ck = Checks::new();
    for role in ["parent", "child", "exec"] {
        match lines.iter().find(|l| l["role"] == role) {
            Some(l) => ck.check(l["pipe_ok"] == true, || {
                format!("{what}: the {role}'s pipe carried {} bytes, not its one line: {l}", l["got"])
            }),
            None => ck.failed.push(format!("{what}: no line from the {role}: {lines:?}")),
        }
    }
    ck.check(!t.out.stderr.contains("failed"), || format!("{what}: the shim said\n{}", t.out.stderr));
    let logs = t.logs();
    // The parent, the forked child, and the child's exec'd image (a log of its own).
    ck.eq(&format!("{what}: logs"), logs.len(), 3);
    for l in &logs {
        let a = analyze_opts(l, |_| false, false);
        ck.check(a.issues.is_empty(), || format!("{}: read issues {:?}", l.display(), a.issues));
        // Each process allocated 4200 x 256 blocks: all of them must be in its log.
        ck.check(a.count("malloc") >= 4200 * 256, || {
            format!("{}: {} mallocs recorded, want 4200 x 256 at least", l.display(), a.count("malloc"))
        });
        ck.check(a.clean_end, || format!("{}: no end record", l.display()));
    }
    ck.finish(&what);
}

#[test]
fn closed_through_the_c_library() {
    for b in BACKENDS {
        check("libc", b);
    }
}

#[test]
fn closefrom_and_dup3() {
    check("closefrom", "glibc");
    check("closefrom", "mimalloc");
}

#[test]
fn closed_by_raw_system_calls() {
    for b in BACKENDS {
        check("raw", b);
    }
}
