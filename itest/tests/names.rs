//! Names as the user gave them (issue 43): a program started through a symlink (Debian's
//! `redis-server` is one to `redis-check-rdb`) is named by the symlink's name in its log's
//! file name and in every verb (`record`'s summary, `stats`, `compare`, `replay`), the
//! resolved executable beside it.
use itest::{command, cprog, run, shimlog_bin, Output};
use std::path::{Path, PathBuf};

fn shimlog(cwd: &Path, args: &[&str]) -> Output {
    let mut c = command(shimlog_bin());
    c.current_dir(cwd).args(args);
    run(c)
}

/// `shimlog record -o DIR -- LINK 20`: the one log it leaves.
fn record(cwd: &Path, dir: &str, link: &Path) -> (PathBuf, Output) {
    let o = shimlog(cwd, &["record", "-o", dir, "--", link.to_str().unwrap(), "20"]);
    o.assert_success("shimlog record");
    let logs: Vec<PathBuf> = std::fs::read_dir(cwd.join(dir))
        .expect("the run's directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "shimlog"))
        .collect();
    assert_eq!(logs.len(), 1, "one process, one log: {logs:?}");
    (logs[0].clone(), o)
}

#[test]
fn a_symlinked_program_is_named_as_started() {
    let cwd = tempfile::Builder::new().prefix("itest-names-").tempdir().expect("tempdir");
    let real = cprog("counts");
    let real = std::fs::canonicalize(&real).expect("canonical path");
    let link = cwd.path().join("started-name");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let shown = format!("started-name ({})", real.display());

    let (a, rec) = record(cwd.path(), "a", &link);
    let (b, _) = record(cwd.path(), "b", &link);
    // The log's file name (%e) and record's summary.
    let file = a.file_name().unwrap().to_string_lossy().into_owned();
    assert!(file.starts_with("started-name."), "the log is named as started: {file}");
    assert!(rec.stderr.contains("started-name"), "record's summary:\n{}", rec.stderr);
    assert!(!rec.stderr.contains(" counts "), "record's summary names the link:\n{}", rec.stderr);
    // The header keeps the resolved executable and the command line as given.
    let h = recorder::LogReader::open(a.to_str().unwrap()).expect("open").header;
    assert_eq!(Path::new(&h.exe), real, "the header's exe is the resolved file");

    // stats: the document's process and the text's heading.
    let s = shimlog(cwd.path(), &["stats", a.to_str().unwrap(), "--json"]);
    s.assert_success("stats --json");
    assert_eq!(s.json()["process"]["program"], shown.as_str(), "stats --json");
    let t = shimlog(cwd.path(), &["stats", a.to_str().unwrap()]);
    t.assert_success("stats");
    let text = t.stdout_str();
    assert!(text.contains(&format!("(runs {})", real.display())), "stats names the resolved file:\n{text}");
    assert!(text.contains(link.to_str().unwrap()), "stats names the program as started:\n{text}");

    // compare: both sides' programs, in the JSON and in the text.
    let c = shimlog(cwd.path(), &["compare", a.to_str().unwrap(), "--vs", b.to_str().unwrap(), "--json"]);
    c.assert_success("compare --json");
    let doc = c.json();
    for side in ["base", "candidate"] {
        assert_eq!(doc[side]["programs"], serde_json::json!([shown]), "compare's {side}");
    }
    let c = shimlog(cwd.path(), &["compare", a.to_str().unwrap(), "--vs", b.to_str().unwrap()]);
    c.assert_success("compare");
    let first = c.stdout_str().lines().next().unwrap_or_default().to_string();
    assert!(first.contains(&shown), "compare's base line: {first}");

    // replay: the program line.
    let r = shimlog(cwd.path(), &["replay", a.to_str().unwrap(), "--backend", "glibc"]);
    r.assert_success("replay");
    let line = r.stdout_str().lines().find(|l| l.trim_start().starts_with("program:")).map(str::to_string);
    let line = line.unwrap_or_else(|| panic!("replay names no program:\n{}", r.stdout_str()));
    assert!(
        line.contains(link.to_str().unwrap()) && line.contains(&format!("(runs {})", real.display())),
        "replay: {line}"
    );
}
