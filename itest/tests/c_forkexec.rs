//! itest/programs/c/forkexec.c under the shim with each backend: a parent forks a child that exits
//! normally and a child that execs the program again, which runs `/bin/sh -c true`. Every
//! process gets its own log (named by its pid; an exec'd image whose pid already has a log
//! gets a suffixed name), every log decodes, and each holds its process's own calls.
use itest::*;
use recorder::Op;
use serde_json::Value;
use std::path::PathBuf;

fn check(backend: &str) {
    let t = run_traced(backend, || command(cprog("forkexec")));
    t.out.assert_success("forkexec under the shim");
    let lines = t.out.json_lines();
    let role = |r: &str| -> &Value {
        lines.iter().find(|l| l["role"] == r).unwrap_or_else(|| panic!("no {r} line in {lines:?}"))
    };
    let pid = |r: &str| role(r)["pid"].as_u64().unwrap() as u32;
    let (parent, child, child_exec) = (pid("parent"), pid("child"), pid("child_exec"));
    let sh = role("exec")["sh_pid"].as_u64().unwrap() as u32;
    assert_eq!(role("parent")["children_ok"], true);
    assert_eq!(pid("exec"), child_exec, "exec keeps the pid");

    let mut ck = Checks::new();
    let logs = t.logs();
    // Processes: parent, child (forked), child_exec (forked, then exec'd: two logs),
    // the fork for sh, and sh itself (exec'd: two logs for that pid).
    ck.eq("number of logs", logs.len(), 6);
    let mut found: Vec<(PathBuf, Analysis)> = Vec::new();
    for l in &logs {
        match recorder::LogReader::open(l.to_str().unwrap()) {
            Ok(_) => {
                found.push((l.clone(), analyze(l, |e| e.op == Op::Malloc && (7001..=7004).contains(&e.size))))
            }
            Err(e) => ck.failed.push(format!(
                "{} ({} bytes) does not open: {e}",
                l.display(),
                std::fs::metadata(l).map(|m| m.len()).unwrap_or(0)
            )),
        }
    }
    let find =
        |pid: u32, forked: bool| found.iter().find(|(_, a)| a.header.pid == pid && a.header.forked == forked);
    let sized = |a: &Analysis, size: u64| a.kept.iter().filter(|e| e.size == size).count() as u64;

    for (l, a) in &found {
        ck.check(a.issues.is_empty(), || format!("{}: read issues {:?}", l.display(), a.issues));
        ck.check(a.double_live == 0, || {
            format!("{}: address live twice {:?}", l.display(), a.double_examples)
        });
        // A forked child frees blocks its parent made before the fork: only the others are strict.
        if !a.header.forked {
            ck.check(a.unmatched_frees == 0, || {
                format!("{}: unmatched frees {:?}", l.display(), a.unmatched_examples)
            });
        }
    }
    match find(parent, false) {
        Some((l, a)) => {
            ck.eq("parent: mallocs of 7001", sized(a, 7001), 3);
            ck.eq("parent: its 7001 blocks freed", a.kept_live.len(), 0);
            ck.check(a.count("fork") >= 2, || {
                format!("{}: {} fork records, want >= 2", l.display(), a.count("fork"))
            });
            ck.check(a.clean_end, || format!("{}: parent log has no end record", l.display()));
            ck.eq("parent: header ppid", a.header.ppid, std::process::id());
        }
        None => ck.failed.push(format!("no log for the parent (pid {parent})")),
    }
    match find(child, true) {
        Some((l, a)) => {
            ck.eq("child: header ppid", a.header.ppid, parent);
            ck.eq("child: mallocs of 7002", sized(a, 7002), 5);
            ck.eq("child: mallocs of 7001 (the parent's, made before the fork)", sized(a, 7001), 0);
            ck.eq("child: its blocks freed", a.kept_live.len(), 0);
            ck.check(a.clean_end, || format!("{}: child log has no end record", l.display()));
        }
        None => ck.failed.push(format!("no forked-child log for pid {child}")),
    }
    match find(child_exec, true) {
        // Its calls between fork and exec are recorded; whether they reach the file before
        // the exec is not promised, so only what is there is checked.
        Some((_, a)) => {
            ck.eq("child_exec (forked): header ppid", a.header.ppid, parent);
            ck.check(sized(a, 7004) <= 2, || "child_exec: more than 2 mallocs of 7004".into());
            ck.eq("child_exec (forked): mallocs of 7003", sized(a, 7003), 0);
        }
        None => ck.failed.push(format!("no forked-child log for pid {child_exec}")),
    }
    match find(child_exec, false) {
        Some((l, a)) => {
            ck.eq("exec'd image: mallocs of 7003", sized(a, 7003), 4);
            ck.eq("exec'd image: mallocs of 7004 (made before exec)", sized(a, 7004), 0);
            ck.eq("exec'd image: its blocks freed", a.kept_live.len(), 0);
            ck.eq("exec'd image: argv[1]", a.header.cmdline.get(1).map(String::as_str), Some("exec"));
            ck.check(a.clean_end, || format!("{}: exec'd log has no end record", l.display()));
            ck.check(l.to_string_lossy().contains(&format!(".{child_exec}.")), || {
                format!("{}: exec'd log not named by its pid", l.display())
            });
        }
        None => ck.failed.push(format!("no log for the exec'd image (pid {child_exec}, not forked)")),
    }
    ck.check(find(sh, true).is_some(), || format!("no forked-child log for the sh fork (pid {sh})"));
    match find(sh, false) {
        Some((_, a)) => {
            let exe = a.header.exe.rsplit('/').next().unwrap_or("").to_string();
            ck.check(exe == "sh" || exe == "dash" || exe == "bash", || {
                format!("sh log exe is {}", a.header.exe)
            });
        }
        None => ck.failed.push(format!("no log for /bin/sh (pid {sh}, exec'd)")),
    }
    ck.finish(&format!("forkexec under {backend}"));
}

#[test]
fn forkexec_glibc() {
    check("glibc");
}

#[test]
fn forkexec_jemalloc() {
    check("jemalloc");
}

#[test]
fn forkexec_mimalloc() {
    check("mimalloc");
}

#[test]
fn forkexec_tcmalloc() {
    check("tcmalloc");
}

#[test]
fn forkexec_snmalloc() {
    check("snmalloc");
}

#[test]
fn forkexec_rpmalloc() {
    check("rpmalloc");
}
