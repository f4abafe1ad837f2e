//! `shimlog export` read back by real DuckDB (the Python package, installed by
//! tools/test-deps.sh; without it these tests fail, naming it): the Parquet tables must
//! give the counts, bytes, peak, cross-thread frees, lifetimes and latency percentiles that
//! `shimlog stats --json` gives for the same log, one log and many logs queried together.
mod synth;

use serde_json::Value;
use std::process::Command;
use synth::random::workload;
use synth::{dir, shimlog, stats_json};

/// A machine whose python3 has no duckdb fails the test, naming it (tools/test-deps.sh
/// installs it with pip).
fn have_duckdb() {
    if !Command::new("python3").args(["-c", "import duckdb"]).output().is_ok_and(|o| o.status.success()) {
        panic!("cannot run: python3's duckdb module is missing (pip install --break-system-packages duckdb; tools/test-deps.sh installs it)");
    }
}

/// Runs `sql` (one query per line) in DuckDB over the export in `root`; each query's rows
/// as JSON arrays.
fn duckdb(root: &str, queries: &[(&str, String)]) -> serde_json::Map<String, Value> {
    let script = r#"
import duckdb, json, sys
qs = json.loads(sys.stdin.read())
con = duckdb.connect()
out = {}
for name, q in qs:
    out[name] = [[float(v) if hasattr(v, 'as_integer_ratio') and not isinstance(v, (int, float)) else v for v in row] for row in con.sql(q).fetchall()]
print(json.dumps(out, default=str))
"#;
    let mut c = Command::new("python3")
        .args(["-c", script])
        .current_dir(root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    c.stdin.take().unwrap().write_all(serde_json::to_string(queries).unwrap().as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "duckdb: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice::<Value>(&o.stdout).unwrap().as_object().unwrap().clone()
}

fn export(args: &[&str]) {
    let o = shimlog(args);
    assert!(o.status.success(), "shimlog {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn int(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A quantile from a histogram of `digits` significant digits against the exact one.
fn near(what: &str, hist: i64, exact: i64, digits: u32) {
    let tol = (exact as f64 * 2.0 / 10f64.powi(digits as i32 - 1)).max(2.0);
    assert!(((hist - exact) as f64).abs() <= tol, "{what}: stats {hist}, DuckDB {exact}");
}

const PEAK: &str = "with d as (select made_seq as seq, 1 as k, size as delta from B union all \
    select freed_seq, 0, -size from B where freed_seq is not null) \
    select max(live) from (select sum(delta) over (order by seq, k rows unbounded preceding) as live from d)";

#[test]
fn one_log_matches_stats() {
    have_duckdb();
    let d = dir("export-one");
    let log = workload(&format!("{d}/w.shimlog"), 700, 0, 4, 40_000, 21);
    export(&["export", &log, "-o", &format!("{d}/out"), "--host", "canary1"]);
    let s = stats_json(&[&log]);
    let p = "out/host=canary1/pid=700";
    let ev = format!("'{p}/events.parquet'");
    let bl = format!("'{p}/blocks.parquet'");
    let q = |sql: &str| sql.replace("E", &ev).replace("B", &bl);
    let r = duckdb(&d, &[
        ("events", q("select count(*) from E")),
        ("ops", q("select op, count(*), sum(case when op not in ('free', 'free_sized') then size * coalesce(count, 1) end), count(*) filter (where ptr = 0 and op not in ('free', 'free_sized')) from E where ptr is not null group by op")),
        ("peak", PEAK.replace("from B", &format!("from {bl}"))),
        ("end", q("select count(*), sum(size) from B where freed_ts is null")),
        ("cross", q("select count(*) filter (where freed_tid <> made_tid), count(freed_tid) from B")),
        ("life", q("select quantile_disc(lifetime_ns, 0.5), quantile_disc(lifetime_ns, 0.9), quantile_disc(lifetime_ns, 0.99), max(lifetime_ns) from B")),
        ("lat", q("select op, count(backend_ns), quantile_disc(backend_ns, 0.5), quantile_disc(backend_ns, 0.9), quantile_disc(backend_ns, 0.99), max(backend_ns) from E where backend_ns is not null group by op")),
        ("threads", format!("select tid, allocs, frees, bytes_allocated from '{p}/threads.parquet'")),
        ("rss", format!("select max(value), count(*) from '{p}/samples.parquet' where stat = 'rss'")),
        ("proc", format!("select pid, exe, backend, events from '{p}/processes.parquet'")),
        ("stack", q("select count(stack_id) from E")),
    ]);
    assert_eq!(int(&r["events"][0][0]), int(&s["events"]));
    let ops = r["ops"].as_array().unwrap();
    let calls: i64 = ops.iter().map(|o| int(&o[1])).sum();
    let stats_calls: i64 = s["ops"].as_object().unwrap().values().map(int).sum();
    assert_eq!(calls, stats_calls, "malloc-family calls");
    for o in ops {
        let op = o[0].as_str().unwrap();
        assert_eq!(int(&o[1]), int(&s["ops"][op]), "ops.{op}");
        if !o[2].is_null() {
            assert_eq!(int(&o[2]), int(&s["bytes"][op]), "bytes.{op}");
        }
        assert_eq!(int(&o[3]), s["failed"].get(op).map_or(0, int), "failed.{op}");
    }
    assert!(s["failed"]["malloc"].as_u64().unwrap() > 0, "the workload has failed calls");
    assert_eq!(int(&r["peak"][0][0]), int(&s["peak_live_bytes"]), "peak live bytes");
    assert_eq!(int(&r["end"][0][0]), int(&s["live_at_end"]["blocks"]));
    assert_eq!(int(&r["end"][0][1]), int(&s["live_at_end"]["bytes"]));
    assert_eq!(int(&r["cross"][0][0]), int(&s["cross_thread_frees"]["count"]), "cross-thread frees");
    assert_eq!(int(&r["cross"][0][1]), int(&s["cross_thread_frees"]["of_frees"]));
    assert!(int(&r["cross"][0][0]) > 1000);
    let l = &r["life"][0];
    let sl = &s["lifetimes"];
    for (i, k) in ["p50_ns", "p90_ns", "p99_ns"].iter().enumerate() {
        near(&format!("lifetimes.{k}"), int(&sl[k]), int(&l[i]), 2);
    }
    near("lifetimes.max_ns", int(&sl["max_ns"]), int(&l[3]), 2);
    assert!(r["lat"].as_array().unwrap().len() >= 4, "timed calls of several functions");
    for o in r["lat"].as_array().unwrap() {
        let op = o[0].as_str().unwrap();
        let sp = &s["latency"]["per_op"][op];
        assert_eq!(int(&o[1]), int(&sp["timed_calls"]), "latency.per_op.{op}.timed_calls");
        for (i, k) in ["p50_ns", "p90_ns", "p99_ns", "max_ns"].iter().enumerate() {
            near(&format!("latency.per_op.{op}.{k}"), int(&sp[k]), int(&o[2 + i]), 3);
        }
    }
    let mut threads: Vec<(i64, i64, i64, i64)> = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (int(&t[0]), int(&t[1]), int(&t[2]), int(&t[3])))
        .collect();
    let mut want: Vec<(i64, i64, i64, i64)> = s["per_thread"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (int(&t["tid"]), int(&t["allocs"]), int(&t["frees"]), int(&t["bytes_allocated"])))
        .collect();
    threads.sort();
    want.sort();
    assert_eq!(threads, want, "threads");
    assert_eq!(int(&r["rss"][0][0]), int(&s["memory"]["peak_rss_bytes"]));
    assert_eq!(int(&r["rss"][0][1]), s["memory"]["samples"].as_array().unwrap().len() as i64);
    assert_eq!(r["proc"][0][0].as_i64(), Some(700));
    assert_eq!(r["proc"][0][1].as_str(), Some("/usr/bin/synthetic"));
    assert_eq!(int(&r["proc"][0][3]), int(&s["events"]));
    assert_eq!(int(&r["stack"][0][0]), 0, "no call stacks in the log: stack_id is NULL");
}

#[test]
fn many_logs_query_together() {
    have_duckdb();
    let d = dir("export-many");
    let logs: Vec<String> = (0..3)
        .map(|i| {
            workload(
                &format!("{d}/w{i}.shimlog"),
                800 + i,
                i as u64 * 1000,
                2 + i,
                5_000 + 3_000 * i as u64,
                40 + i as u64,
            )
        })
        .collect();
    // Two hosts: the first two logs from one, the third from another.
    export(&["export", &logs[0], &logs[1], "-o", &format!("{d}/fleet"), "--host", "a"]);
    export(&["export", &logs[2], "-o", &format!("{d}/fleet"), "--host", "b"]);
    let r = duckdb(&d, &[
        ("per", "select host, pid, count(*) from read_parquet('fleet/*/*/events*.parquet', hive_partitioning = true) group by all order by pid".into()),
        ("cross", "select count(*) filter (where freed_tid <> made_tid), max(size) from read_parquet('fleet/*/*/blocks*.parquet', hive_partitioning = true)".into()),
        ("procs", "select count(*), sum(events) from read_parquet('fleet/*/*/processes*.parquet', hive_partitioning = true)".into()),
    ]);
    let total = stats_json(&logs.iter().map(String::as_str).collect::<Vec<_>>());
    let per = r["per"].as_array().unwrap();
    assert_eq!(per.len(), 3);
    for (i, row) in per.iter().enumerate() {
        assert_eq!(row[0].as_str(), Some(if i < 2 { "a" } else { "b" }));
        assert_eq!(int(&row[1]), 800 + i as i64);
        assert_eq!(int(&row[2]), int(&stats_json(&[&logs[i]])["events"]), "events of log {i}");
    }
    assert_eq!(
        int(&r["cross"][0][0]),
        int(&total["cross_thread_frees"]["count"]),
        "cross-thread frees of all logs"
    );
    assert_eq!(int(&r["procs"][0][1]), int(&total["events"]));
    // A second export into the same partition is refused, not mixed in.
    let o = shimlog(&["export", &logs[2], "-o", &format!("{d}/fleet"), "--host", "b"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("exists already"));
}

#[test]
fn tables_chosen_and_bad_options() {
    let d = dir("export-tables");
    let log = workload(&format!("{d}/w.shimlog"), 900, 0, 2, 1_000, 9);
    export(&["export", &log, "-o", &format!("{d}/out"), "--tables", "events,processes", "--host", "h"]);
    let mut files: Vec<String> = std::fs::read_dir(format!("{d}/out/host=h/pid=900"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["events.parquet", "processes.parquet"]);
    for f in &files {
        let b = std::fs::read(format!("{d}/out/host=h/pid=900/{f}")).unwrap();
        assert!(b.starts_with(b"PAR1") && b.ends_with(b"PAR1"), "{f} is not a Parquet file");
    }
    // One tree per table.
    export(&[
        "export",
        &log,
        "-o",
        &format!("{d}/t"),
        "--tables",
        "events,blocks",
        "--host",
        "h",
        "--layout",
        "table",
    ]);
    for t in ["events", "blocks"] {
        assert!(
            std::path::Path::new(&format!("{d}/t/{t}/host=h/pid=900/{t}.parquet")).exists(),
            "{t} in its own tree"
        );
    }
    let o = shimlog(&["export", &log, "-o", &format!("{d}/x"), "--tables", "events,heap"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("unknown table 'heap' (accepted: events, blocks, threads, samples, processes, stacks)"));
    let o = shimlog(&["export", &log, "-o", &format!("{d}/y"), "--host", "a/b"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
}
