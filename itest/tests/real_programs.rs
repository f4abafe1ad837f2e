//! Real programs under the shim with each backend: python3 running a threaded script, git
//! making commits in a new repository, gcc compiling and linking a C file, and a shell
//! pipeline of several processes. Each must print exactly what it prints without the shim
//! and exit the same way; every process it starts leaves a log that decodes, with no address
//! live twice; each program it execs has a log of its own; the logs of processes that were
//! not forked (each exec'd program) never free a block they did not allocate, and those of
//! programs that end with exit() (all here but dash, which ends with _exit) are complete.
use itest::*;
use std::path::Path;
use std::process::Command;

const PY_SCRIPT: &str = r#"
import hashlib, json, threading
results = [None] * 4
def work(i):
    d = {}
    for k in range(20000):
        d["k%d-%d" % (i, k)] = [k, str(k) * (k % 7), {"x": k, "y": [k] * (k % 5)}]
    s = json.dumps(d, sort_keys=True)
    results[i] = [len(d), len(s), hashlib.sha256(s.encode()).hexdigest()[:16]]
threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(results))
"#;

const GIT_SCRIPT: &str = r#"set -e
git init -q -b main repo
cd repo
seq 1 500 > a.txt
echo hello > b.txt
git add .
git commit -q -m first
seq 1 2 500 > a.txt
git commit -q -am second
git log --format='%H %s'
git diff --stat HEAD~1 HEAD
git cat-file -p HEAD:b.txt
git --version
"#;

const HELLO_C: &str = include_str!("../programs/inline/hello.c");

struct Case {
    name: &'static str,
    setup: fn(&Path),
    make: fn(&Path) -> Command,
    /// Executables (by name, see `is_exe`) that must each leave a complete log.
    programs: &'static [&'static str],
}

/// Does the executable path `exe` name program `p` (also as a target-prefixed or versioned
/// name: x86_64-linux-gnu-gcc-12, x86_64-linux-gnu-ld.bfd, python3.11)?
fn is_exe(exe: &str, p: &str) -> bool {
    let base = exe.rsplit('/').next().unwrap_or(exe);
    base == p
        || base.ends_with(&format!("-{p}"))
        || base.contains(&format!("-{p}-"))
        || base.contains(&format!("-{p}."))
        || base.starts_with(&format!("{p}."))
}

/// dash leaves with _exit(), which runs no exit handler: its last buffer is not written.
fn ends_with_exit(exe: &str) -> bool {
    !(is_exe(exe, "dash") || is_exe(exe, "sh"))
}

fn sh(dir: &Path, script: &str) -> Command {
    let mut c = command("/bin/sh");
    c.arg("-c").arg(script).current_dir(dir);
    c
}

fn python_case() -> Case {
    Case {
        name: "python3 threaded script",
        setup: |d| std::fs::write(d.join("threads.py"), PY_SCRIPT).unwrap(),
        make: |d| {
            let mut c = command(python3());
            c.arg("threads.py").current_dir(d).env("PYTHONHASHSEED", "0").env("PYTHONDONTWRITEBYTECODE", "1");
            c
        },
        programs: &["python3"],
    }
}

fn git_case() -> Case {
    Case {
        name: "git init/add/commit/log",
        setup: |_| {},
        make: |d| {
            let mut c = sh(d, GIT_SCRIPT);
            for (k, v) in [
                ("GIT_AUTHOR_NAME", "itest"),
                ("GIT_AUTHOR_EMAIL", "itest@example.com"),
                ("GIT_COMMITTER_NAME", "itest"),
                ("GIT_COMMITTER_EMAIL", "itest@example.com"),
                ("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z"),
                ("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z"),
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ] {
                c.env(k, v);
            }
            c.env("HOME", d);
            c
        },
        programs: &["git", "seq"],
    }
}

fn gcc_case() -> Case {
    Case {
        name: "gcc compiling and linking a C file",
        setup: |d| std::fs::write(d.join("hello.c"), HELLO_C).unwrap(),
        make: |d| sh(d, "gcc -O2 -S -o - hello.c && gcc -O1 -o hello hello.c && ./hello"),
        programs: &["gcc", "cc1", "as", "collect2", "ld", "hello"],
    }
}

fn pipeline_case() -> Case {
    Case {
        name: "shell pipeline",
        setup: |_| {},
        make: |d| sh(d, "seq 1 2000 | sort -n | uniq | wc -l; seq 1 300 | sort -rn | head -3"),
        programs: &["dash", "seq", "sort", "uniq", "wc", "head"],
    }
}

fn check(case: Case, backend: &str) {
    let plain_dir = tempfile::tempdir().unwrap();
    (case.setup)(plain_dir.path());
    let plain = run((case.make)(plain_dir.path()));
    plain.assert_success(&format!("{} without the shim", case.name));

    let work = tempfile::tempdir().unwrap();
    (case.setup)(work.path());
    let t = run_traced(backend, || (case.make)(work.path()));
    let ctx = format!("{} under the shim with {backend}", case.name);
    assert_eq!(
        t.out.status.code(),
        plain.status.code(),
        "{ctx}: exit status differs\nstderr:\n{}",
        t.out.stderr
    );
    assert_eq!(t.out.stdout_str(), plain.stdout_str(), "{ctx}: stdout differs");
    assert_eq!(t.out.stderr, plain.stderr, "{ctx}: stderr differs");

    let mut ck = Checks::new();
    let logs = t.logs();
    ck.check(!logs.is_empty(), || "no log written".into());
    let mut seen: Vec<String> = Vec::new();
    for l in &logs {
        if let Err(e) = recorder::LogReader::open(l.to_str().unwrap()) {
            let len = std::fs::metadata(l).map(|m| m.len()).unwrap_or(0);
            ck.failed.push(format!("{} ({len} bytes) does not open: {e}", l.display()));
            continue;
        }
        let a = analyze(l, |_| false);
        let name = format!("{} ({})", l.display(), a.header.exe);
        ck.check(a.issues.is_empty(), || format!("{name}: read issues {:?}", a.issues));
        ck.check(a.double_live == 0, || format!("{name}: address live twice {:?}", a.double_examples));
        ck.check(a.misaligned == 0, || format!("{name}: misaligned {:?}", a.misaligned_examples));
        if !a.header.forked {
            ck.check(a.unmatched_frees == 0, || {
                format!(
                    "{name}: {} frees of blocks not live, e.g. {:?}",
                    a.unmatched_frees, a.unmatched_examples
                )
            });
        }
        ck.eq(&format!("{name}: backend"), a.header.backend.as_str(), backend);
        if !a.header.forked {
            seen.push(a.header.exe.clone());
            if ends_with_exit(&a.header.exe) {
                ck.check(a.clean_end, || format!("{name}: no end record after exit()"));
                ck.check(a.alloc_events > 0, || format!("{name}: no allocation events"));
            }
        }
    }
    for p in case.programs {
        ck.check(seen.iter().any(|e| is_exe(e, p)), || format!("no log of {p} (logs of: {seen:?})"));
    }
    ck.finish(&ctx);
}

macro_rules! cases {
    ($($name:ident: $case:ident, $backend:literal;)*) => {
        $(#[test] fn $name() { check($case(), $backend); })*
    };
}

cases! {
    python_glibc: python_case, "glibc";
    python_jemalloc: python_case, "jemalloc";
    python_mimalloc: python_case, "mimalloc";
    git_glibc: git_case, "glibc";
    git_jemalloc: git_case, "jemalloc";
    git_mimalloc: git_case, "mimalloc";
    gcc_glibc: gcc_case, "glibc";
    gcc_jemalloc: gcc_case, "jemalloc";
    gcc_mimalloc: gcc_case, "mimalloc";
    pipeline_glibc: pipeline_case, "glibc";
    pipeline_jemalloc: pipeline_case, "jemalloc";
    pipeline_mimalloc: pipeline_case, "mimalloc";
    python_tcmalloc: python_case, "tcmalloc";
    python_snmalloc: python_case, "snmalloc";
    python_rpmalloc: python_case, "rpmalloc";
    git_tcmalloc: git_case, "tcmalloc";
    git_snmalloc: git_case, "snmalloc";
    git_rpmalloc: git_case, "rpmalloc";
    gcc_tcmalloc: gcc_case, "tcmalloc";
    gcc_snmalloc: gcc_case, "snmalloc";
    gcc_rpmalloc: gcc_case, "rpmalloc";
    pipeline_tcmalloc: pipeline_case, "tcmalloc";
    pipeline_snmalloc: pipeline_case, "snmalloc";
    pipeline_rpmalloc: pipeline_case, "rpmalloc";
}
