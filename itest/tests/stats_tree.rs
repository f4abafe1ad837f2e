//! `shimlog stats` of a whole process tree (shimlog/src/stats/tree.rs): a real `sh -c` that
//! forks subshells and a pipeline and execs programs, recorded with `shimlog record`; its
//! logs' stats open with one table of every process (pid, parent, program, lifetime,
//! events, peak live, peak RSS, how it ended) in tree order, then the total, then the
//! largest processes' sections (all with --each); --json carries the same table as `tree`.
use itest::{command, run, shimlog_bin, Output};
use recorder::LogReader;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn shimlog(cwd: &Path, args: &[&str]) -> Output {
    let mut c = command(shimlog_bin());
    c.current_dir(cwd).args(args);
    run(c)
}

const SCRIPT: &str = "ls / >/dev/null; (echo b; echo a) | sort >/dev/null; sh -c 'cat /etc/hostname >/dev/null'; (true); exit 3";

#[test]
fn stats_opens_with_the_process_tree() {
    let cwd = tempfile::Builder::new().prefix("itest-tree-").tempdir().expect("tempdir");
    let o = shimlog(cwd.path(), &["record", "-q", "-o", "rec", "--", "sh", "-c", SCRIPT]);
    assert_eq!(o.status.code(), Some(3), "the shell's status passes through\n{}", o.stderr);
    let mut logs: Vec<PathBuf> = std::fs::read_dir(cwd.path().join("rec"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "shimlog"))
        .collect();
    logs.sort();
    assert!(
        logs.len() > 5,
        "sh, ls, the pipeline's two sides, sort, the inner sh and cat, the subshell: {logs:?}"
    );
    let names: Vec<String> =
        logs.iter().map(|p| format!("rec/{}", p.file_name().unwrap().to_string_lossy())).collect();
    let headers: Vec<LogReader> =
        logs.iter().map(|p| LogReader::open(p.to_str().unwrap()).unwrap()).collect();
    let mut args = vec!["stats", "--json"];
    args.extend(names.iter().map(|s| s.as_str()));
    let j = shimlog(cwd.path(), &args);
    j.assert_success("stats --json");
    let doc: Value = j.json();
    let tree = doc["tree"].as_array().expect("a tree of several logs");
    let per = doc["logs"].as_array().unwrap();
    assert_eq!(tree.len(), logs.len(), "one row per log");

    // Each row is its log's section: pid and parent of the header, the section's counts.
    let mut seen = vec![false; logs.len()];
    for r in tree {
        let i = r["log_index"].as_u64().unwrap() as usize;
        assert!(!seen[i], "log {i} twice in the tree");
        seen[i] = true;
        let (h, s) = (&headers[i].header, &per[i]);
        assert_eq!(r["log"], names[i].as_str());
        assert_eq!(r["pid"].as_u64(), Some(h.pid as u64), "{r}");
        assert_eq!(r["ppid"].as_u64(), Some(h.ppid as u64), "{r}");
        assert_eq!(r["events"], s["events"], "{r}");
        assert_eq!(r["events"].as_u64(), Some(headers[i].record_count()), "the log's records: {r}");
        assert_eq!(r["lifetime_ns"], s["duration_ns"], "{r}");
        assert_eq!(r["peak_live_bytes"], s["peak_live_bytes"], "{r}");
        assert_eq!(r["peak_rss_bytes"], s["memory"]["peak_rss_bytes"], "{r}");
        // Named as started (argv[0]: `sh`, not the `dash` it resolves to).
        let exe = match h.cmdline.first() {
            Some(a) => a.rsplit('/').next().unwrap().to_string(),
            None => Path::new(&h.exe).file_name().unwrap().to_string_lossy().into_owned(),
        };
        assert!(r["program"].as_str().unwrap().starts_with(&exe), "{r} is {exe}");
    }
    // Tree order: a child comes after its parent's first row, one level deeper; the root is
    // the shell, which exited with 3; a process that exec'd says so, and the program it
    // became follows it with the same pid.
    for (k, r) in tree.iter().enumerate() {
        let parent = tree[..k].iter().rev().find(|p| p["pid"] == r["ppid"] && p["pid"] != r["pid"]);
        match parent {
            Some(p) => {
                assert_eq!(r["depth"].as_u64(), Some(p["depth"].as_u64().unwrap() + 1), "{r} under {p}")
            }
            None => assert!(
                !tree.iter().any(|p| p["pid"] == r["ppid"] && p["pid"] != r["pid"]),
                "{r} comes before its parent"
            ),
        }
    }
    assert_eq!(tree[0]["depth"], 0);
    assert!(
        tree[0]["program"].as_str().unwrap().ends_with("sh") || tree[0]["program"] == "dash",
        "{}",
        tree[0]
    );
    assert!(["exit(3)", "_exit(3)"].contains(&tree[0]["ended"].as_str().unwrap()), "{}", tree[0]);
    for (k, r) in tree.iter().enumerate() {
        if r["ended"] == "exec" {
            assert_eq!(tree[k + 1]["pid"], r["pid"], "the exec'd program follows {r}");
        }
    }
    for prog in ["ls", "sort", "cat"] {
        let r = tree.iter().find(|r| r["program"] == prog).unwrap_or_else(|| panic!("no {prog} in {tree:?}"));
        assert_eq!(r["ended"], "exit(0)", "{r}");
        assert!(r["depth"].as_u64().unwrap() >= 1, "{prog} is below the shell: {r}");
    }

    // The text: the table first (every pid, in the JSON's order), then the total, then the
    // five processes with the most events and a line saying how many were left out.
    let mut args = vec!["stats"];
    args.extend(names.iter().map(|s| s.as_str()));
    let t = shimlog(cwd.path(), &args);
    t.assert_success("stats");
    let text = t.stdout_str();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("== process tree: {} processes", logs.len()));
    for (k, r) in tree.iter().enumerate() {
        let cells: Vec<&str> = lines[2 + k].split_whitespace().collect();
        assert_eq!(cells[0], r["pid"].to_string(), "row {k}: {}", lines[2 + k]);
        assert_eq!(cells[1], r["ppid"].to_string(), "row {k}: {}", lines[2 + k]);
        assert!(lines[2 + k].contains(r["program"].as_str().unwrap()), "row {k}: {}", lines[2 + k]);
        assert!(lines[2 + k].trim_end().ends_with(r["ended"].as_str().unwrap()), "row {k}: {}", lines[2 + k]);
    }
    let heads: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("== ")).collect();
    assert!(heads[1].starts_with("== total of"), "the total second: {heads:?}");
    let left = logs.len() - 5;
    assert_eq!(heads.len(), 2 + 5, "the five largest processes' sections: {heads:?}");
    assert!(
        text.contains(&format!("{left} left out (`shimlog stats --each` shows every one)")),
        "{}",
        &text[..text.len().min(3000)]
    );
    let mut by_events: Vec<&Value> = tree.iter().collect();
    by_events.sort_by_key(|r| std::cmp::Reverse(r["events"].as_u64().unwrap()));
    let smallest_shown = by_events[4]["events"].as_u64().unwrap();
    for r in tree {
        let shown = heads.contains(&format!("== {}", r["log"].as_str().unwrap()).as_str());
        let n = r["events"].as_u64().unwrap();
        assert!(if shown { n >= smallest_shown } else { n <= smallest_shown }, "{r} shown: {shown}");
    }

    // --each: every process.
    let mut args = vec!["stats", "--each"];
    args.extend(names.iter().map(|s| s.as_str()));
    let e = shimlog(cwd.path(), &args);
    e.assert_success("stats --each");
    let all = e.stdout_str();
    let heads = all.lines().filter(|l| l.starts_with("== ")).count();
    assert_eq!(heads, 2 + logs.len());
    assert!(!all.contains("left out"));
}
