//! Fleets on a real engine (docs/fleets.md): processes recorded on three "hosts" (each its
//! own run and directory, its own allocator), each host's logs exported with `shimlog export
//! --host`, the exports under one root; then every query of docs/fleets.md (read from the
//! page itself) runs in DuckDB and in Apache Spark (pyspark, local mode, on the Java
//! runtime): both engines must give the same rows, and the rows must be what `shimlog stats
//! --json` says of the same logs. The query over two exports (the sites that grew) runs on
//! two exports of a program recorded with its stacks, one of whose call sites keeps more
//! bytes in the second run.
use itest::{command, cprog, need, run, shimlog_bin, workspace_root, Output};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const HOSTS: [(&str, &str); 3] = [("web-1", "glibc"), ("web-2", "jemalloc"), ("batch-1", "mimalloc")];
/// xthread's rounds and blocks per round: two processes a host.
const RUNS: [(&str, &str); 2] = [("30", "64"), ("12", "200")];

fn shimlog(args: &[&str]) -> Output {
    let mut c = command(shimlog_bin());
    c.args(args);
    run(c)
}

fn have(py_module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {py_module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The queries of docs/fleets.md: each ```sql block that starts with `-- query: NAME`.
fn documented_queries() -> Vec<(String, String)> {
    let page = std::fs::read_to_string(workspace_root().join("docs/fleets.md")).expect("docs/fleets.md");
    let mut out = Vec::new();
    for block in page.split("```sql\n").skip(1) {
        let body = block.split("```").next().unwrap();
        if let Some(rest) = body.strip_prefix("-- query: ") {
            let (name, sql) = rest.split_once('\n').unwrap();
            out.push((name.trim().to_string(), sql.trim().to_string()));
        }
    }
    out
}

/// The queries of docs/fleets.md that compare two exports (views `old_*` and `new_*`).
const TWO_EXPORTS: [&str; 1] = ["sites_that_grew"];

/// The engines' rows for `queries` over the export at `root` (and `extra`: NAME=ROOT views).
fn engines(root: &std::path::Path, extra: &[String], queries: &[(String, String)]) -> Value {
    let mut py = Command::new("python3")
        .arg(workspace_root().join("itest/py/fleet_queries.py"))
        .arg(root)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    py.stdin.take().unwrap().write_all(serde_json::to_string(queries).unwrap().as_bytes()).unwrap();
    let o = py.wait_with_output().unwrap();
    assert!(o.status.success(), "the engines: {}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    // Both engines, row for row.
    let (duck, spark) = (&r["duckdb"], &r["spark"]);
    for (name, _) in queries {
        let (d, s) = (duck[name].as_array().unwrap(), spark[name].as_array().unwrap());
        assert!(!d.is_empty(), "{name}: no rows");
        assert_eq!(d.len(), s.len(), "{name}: DuckDB {d:?}\nSpark {s:?}");
        for (a, b) in d.iter().zip(s) {
            for (x, y) in a.as_array().unwrap().iter().zip(b.as_array().unwrap()) {
                let same = match (x.as_f64(), y.as_f64()) {
                    (Some(p), Some(q)) => (p - q).abs() <= 1e-9 * p.abs().max(1.0),
                    _ => x == y,
                };
                assert!(same, "{name}: DuckDB {a} against Spark {b}");
            }
        }
    }
    r
}

fn need_engines() {
    if !have("duckdb") {
        need("python3's duckdb module", "pip install --break-system-packages duckdb");
    }
    if !have("pyspark") {
        need("python3's pyspark module (Apache Spark)", "pip install --break-system-packages pyspark");
    }
    if !Command::new("java").arg("-version").output().is_ok_and(|o| o.status.success()) {
        need("a Java runtime for Spark", "apt-get install default-jre-headless");
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn int(v: &Value) -> u64 {
    let f = num(v);
    assert!(f >= 0.0 && f.fract() == 0.0, "not a count: {v}");
    f as u64
}

/// A quantile of stats' histogram (three significant digits) against the exact one.
fn near(what: &str, hist: u64, exact: u64) {
    let tol = (exact as f64 * 2.0 / 100.0).max(2.0);
    assert!((hist as f64 - exact as f64).abs() <= tol, "{what}: stats {hist}, the engines {exact}");
}

#[test]
fn duckdb_and_spark_answer_the_documented_queries_as_stats_does() {
    need_engines();
    let all = documented_queries();
    let names: Vec<&str> = all.iter().map(|q| q.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "p99_per_host_op",
            "peak_live_per_process",
            "cross_thread_share",
            "backend_per_host",
            "sites_that_grew"
        ],
        "docs/fleets.md's queries"
    );
    let queries: Vec<(String, String)> =
        all.into_iter().filter(|q| !TWO_EXPORTS.contains(&q.0.as_str())).collect();

    let tmp = tempfile::Builder::new().prefix("itest-fleet-").tempdir().expect("tempdir");
    let fleet = tmp.path().join("fleet");
    let xthread = cprog("xthread");
    // host -> stats --json of its logs; (host, pid) -> that process's section.
    let mut host_stats: BTreeMap<&str, Value> = BTreeMap::new();
    let mut procs: BTreeMap<(String, u64), Value> = BTreeMap::new();
    for (host, backend) in HOSTS {
        let mut logs: Vec<PathBuf> = Vec::new();
        for (i, (rounds, per)) in RUNS.iter().enumerate() {
            let dir = tmp.path().join("runs").join(host).join(format!("run{i}"));
            let o = shimlog(&[
                "record",
                "-q",
                "--timing",
                "all",
                "--backend",
                backend,
                "-o",
                dir.to_str().unwrap(),
                "--",
                xthread.to_str().unwrap(),
                rounds,
                per,
            ]);
            o.assert_success(&format!("{host}: xthread under shimlog record"));
            logs.extend(
                std::fs::read_dir(&dir)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|x| x == "shimlog")),
            );
        }
        assert_eq!(logs.len(), RUNS.len(), "{host}: one log a process");
        let logs: Vec<&str> = logs.iter().map(|p| p.to_str().unwrap()).collect();
        let mut args = vec!["export", "-o", fleet.to_str().unwrap(), "--host", host];
        args.extend(&logs);
        shimlog(&args).assert_success(&format!("{host}: export"));
        let mut args = vec!["stats", "--json"];
        args.extend(&logs);
        let s = shimlog(&args);
        s.assert_success(&format!("{host}: stats"));
        let s = s.json();
        for p in s["logs"].as_array().unwrap() {
            procs.insert((host.to_string(), p["process"]["pid"].as_u64().unwrap()), p.clone());
        }
        host_stats.insert(host, s);
    }

    let r = engines(&fleet, &[], &queries);
    let duck = &r["duckdb"];

    // p99 per host and operation: stats of the host's logs, its total's latency.
    let rows = duck["p99_per_host_op"].as_array().unwrap();
    for (host, _) in HOSTS {
        let per_op = host_stats[host]["latency"]["per_op"].as_object().unwrap();
        let mine: Vec<&Value> = rows.iter().filter(|r| r[0] == host).collect();
        assert_eq!(
            mine.len(),
            per_op.len(),
            "{host}: the functions timed: {mine:?} against {:?}",
            per_op.keys()
        );
        for r in mine {
            let op = r[1].as_str().unwrap();
            let sp = &per_op[op];
            assert_eq!(int(&r[2]), sp["timed_calls"].as_u64().unwrap(), "{host} {op}: timed calls");
            near(&format!("{host} {op} p99"), sp["p99_ns"].as_u64().unwrap(), int(&r[3]));
        }
    }
    // Peak live bytes and the cross-thread share, per process.
    let peaks = duck["peak_live_per_process"].as_array().unwrap();
    assert_eq!(peaks.len(), procs.len(), "one row a process");
    for r in peaks {
        let p = &procs[&(r[0].as_str().unwrap().to_string(), int(&r[1]))];
        assert_eq!(int(&r[2]), p["peak_live_bytes"].as_u64().unwrap(), "{r}");
    }
    let cross = duck["cross_thread_share"].as_array().unwrap();
    assert_eq!(cross.len(), procs.len());
    for r in cross {
        let p = &procs[&(r[0].as_str().unwrap().to_string(), int(&r[1]))];
        let c = &p["cross_thread_frees"];
        assert_eq!(int(&r[2]), c["count"].as_u64().unwrap(), "{r}");
        assert_eq!(int(&r[3]), c["of_frees"].as_u64().unwrap(), "{r}");
        assert!(int(&r[2]) > 100, "xthread frees across threads: {r}");
        let share = c["count"].as_f64().unwrap() / c["of_frees"].as_f64().unwrap();
        assert!((num(&r[4]) - share).abs() < 0.00006, "{r}: stats' share {share}");
    }
    let backends = duck["backend_per_host"].as_array().unwrap();
    assert_eq!(backends.len(), HOSTS.len());
    for r in backends {
        let host = r[0].as_str().unwrap();
        let (_, b) = HOSTS.iter().find(|h| h.0 == host).unwrap();
        assert_eq!(r[1].as_str(), Some(*b), "{r}");
        assert_eq!(int(&r[2]), RUNS.len() as u64);
        assert_eq!(int(&r[3]), host_stats[host]["events"].as_u64().unwrap(), "{r}: the host's events");
    }
}

/// Two exports of `grow` recorded with every stack: its keeper site keeps 100 blocks live in
/// the first run, 300 in the second; its steady site the same in both. The documented query
/// must give keeper alone, in both engines, with the bytes `stats --json` says it leaves live
/// in each run (its `leaked` list).
#[test]
fn the_sites_that_grew_between_two_exports() {
    need_engines();
    let queries: Vec<(String, String)> =
        documented_queries().into_iter().filter(|q| TWO_EXPORTS.contains(&q.0.as_str())).collect();
    assert_eq!(queries.len(), TWO_EXPORTS.len(), "docs/fleets.md's queries over two exports");
    let tmp = tempfile::Builder::new().prefix("itest-fleet-grew-").tempdir().expect("tempdir");
    let grow = cprog("grow");
    let mut roots = Vec::new();
    let mut leaked = Vec::new();
    for (day, keep) in [("old", "100"), ("new", "300")] {
        let dir = tmp.path().join("runs").join(day);
        shimlog(&[
            "record",
            "-q",
            "--stacks",
            "all",
            "-o",
            dir.to_str().unwrap(),
            "--",
            grow.to_str().unwrap(),
            keep,
        ])
        .assert_success(&format!("{day}: grow under shimlog record --stacks all"));
        let logs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "shimlog"))
            .collect();
        assert_eq!(logs.len(), 1, "{day}: one log");
        let log = logs[0].to_str().unwrap();
        let root = tmp.path().join(day);
        shimlog(&["export", "-o", root.to_str().unwrap(), "--host", "canary", log])
            .assert_success(&format!("{day}: export"));
        let s = shimlog(&["stats", "--json", "--top", "50", log]);
        s.assert_success(&format!("{day}: stats"));
        let s = s.json();
        assert_eq!(s["sites"]["mode"], "all", "{day}: stats' call sites");
        let by_site: BTreeMap<String, u64> = s["sites"]["leaked"]
            .as_array()
            .expect("stats' leaked sites")
            .iter()
            .map(|r| (r["function"].as_str().unwrap().to_string(), r["leaked_bytes"].as_u64().unwrap()))
            .collect();
        roots.push(format!("{day}={}", root.display()));
        leaked.push(by_site);
    }
    // The program did what the test needs: keeper grew, steady did not.
    assert_eq!(leaked[0].get("keeper"), Some(&(100 * 3000)), "old: {:?}", leaked[0]);
    assert_eq!(leaked[1].get("keeper"), Some(&(300 * 3000)), "new: {:?}", leaked[1]);
    assert_eq!(leaked[0].get("steady"), Some(&(200 * 5000)), "old: {:?}", leaked[0]);
    assert_eq!(leaked[0].get("steady"), leaked[1].get("steady"));

    let r = engines(&tmp.path().join("old"), &roots, &queries);
    for engine in ["duckdb", "spark"] {
        let rows = r[engine]["sites_that_grew"].as_array().unwrap();
        // Every site stats saw grow (its leaked bytes rose), and no other.
        let grew: Vec<&String> = leaked[1]
            .iter()
            .filter(|(f, b)| leaked[0].get(*f).is_none_or(|o| *b > o))
            .map(|(f, _)| f)
            .collect();
        assert_eq!(grew, ["keeper"], "stats' leaked sites: {leaked:?}");
        assert_eq!(rows.len(), 1, "{engine}: {rows:?}");
        let row = rows[0].as_array().unwrap();
        assert_eq!(row[0], "keeper", "{engine}: {row:?}");
        assert_eq!(int(&row[1]), leaked[0]["keeper"], "{engine}: old bytes");
        assert_eq!(int(&row[2]), leaked[1]["keeper"], "{engine}: new bytes");
        assert_eq!(int(&row[3]), leaked[1]["keeper"] - leaked[0]["keeper"], "{engine}: grew by");
    }
}
