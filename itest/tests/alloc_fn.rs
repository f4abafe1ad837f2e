//! `--alloc-fn`: the program's own allocation wrappers folded into their callers. Debian's
//! redis-server recorded with `shimlog record --stacks sample` under redis-benchmark: with
//! the wrappers left in (`--alloc-fn none`) its top site by bytes is one of zmalloc.c's, by
//! default it is not, and `go tool pprof -top` on the exported profile names the same top
//! site, the profile carrying the wrappers in `drop_frames`. A bad expression is one line
//! and exit 2; one matching every frame is one line and the stacks left whole.
use itest::*;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tool(name: &str) -> PathBuf {
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let p = dir.join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("{name} not found on PATH: install Debian's redis-server and redis-tools (apt-get install redis-server redis-tools; tools/test-deps.sh does)");
}

fn cli(port: u16, args: &[&str]) -> Option<String> {
    let mut c = command(tool("redis-cli"));
    c.args(["-h", "127.0.0.1", "-p", &port.to_string()]).args(args);
    let o = c.stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// redis-server recorded with sampled stacks (a sample per 64 KiB) through redis-benchmark's
/// set, get, lpush and lpop; its log.
fn recorded_redis(dir: &Path) -> PathBuf {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let rec = dir.join("rec");
    let mut c = command(shimlog_bin());
    c.arg("record").arg("-o").arg(&rec).args([
        "--stacks",
        "sample",
        "--sample-bytes",
        "64k",
        "--quiet",
        "--",
    ]);
    c.arg(tool("redis-server"))
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--dir", dir.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().expect("shimlog record redis-server");
    let t0 = Instant::now();
    while cli(port, &["PING"]).map(|o| o.trim() != "PONG").unwrap_or(true) {
        if t0.elapsed() > Duration::from_secs(20) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("redis-server under shimlog record never answered PING");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut b = command(tool("redis-benchmark"));
    b.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-t", "set,get,lpush,lpop", "-n", "20000", "-q"]);
    run(b).assert_success("redis-benchmark");
    let _ = cli(port, &["SHUTDOWN", "NOSAVE"]);
    let st = child.wait().unwrap();
    assert!(st.success(), "shimlog record redis-server exited with {st}");
    let logs: Vec<PathBuf> =
        list_files(&rec).into_iter().filter(|p| p.extension().is_some_and(|x| x == "shimlog")).collect();
    assert_eq!(logs.len(), 1, "one log expected: {logs:?}");
    logs[0].clone()
}

fn stats(log: &Path, extra: &[&str]) -> serde_json::Value {
    let mut c = command(shimlog_bin());
    c.arg("stats").arg(log).args(["--json", "--top", "5"]).args(extra);
    let o = run(c);
    o.assert_success("shimlog stats --json");
    o.json()
}

fn top_by_bytes(s: &serde_json::Value) -> String {
    s["sites"]["by_bytes"][0]["function"].as_str().unwrap_or_else(|| panic!("no site: {}", s["sites"])).into()
}

/// One of Redis' zmalloc.c wrappers.
fn is_zmalloc(f: &str) -> bool {
    f.starts_with("zmalloc") || f.starts_with("ztry") || f.starts_with("zcalloc") || f.starts_with("zrealloc")
}

fn go() -> Command {
    let ok = Command::new("go").arg("version").output().is_ok_and(|o| o.status.success());
    assert!(ok, "cannot run: go is missing (apt-get install golang-go; tools/test-deps.sh installs it)");
    let mut c = command("go");
    c.env("HOME", std::env::temp_dir())
        .env("GOCACHE", workspace_root().join("target/stacks-tests/gocache"))
        .env("GOFLAGS", "-mod=mod");
    c
}

/// A gzipped profile.proto's drop_frames (field 7, an index into the string table, field 6).
fn drop_frames(pb: &Path) -> String {
    let o = Command::new("gzip").arg("-dc").arg(pb).output().expect("gzip -dc");
    assert!(o.status.success(), "gzip -dc {}", pb.display());
    let b = o.stdout;
    let varint = |i: &mut usize| {
        let (mut v, mut s) = (0u64, 0);
        loop {
            let x = b[*i];
            *i += 1;
            v |= ((x & 0x7f) as u64) << s;
            s += 7;
            if x < 0x80 {
                return v;
            }
        }
    };
    let (mut i, mut strings, mut drop) = (0, Vec::new(), 0u64);
    while i < b.len() {
        let key = varint(&mut i);
        match key & 7 {
            0 => {
                let v = varint(&mut i);
                if key >> 3 == 7 {
                    drop = v;
                }
            }
            2 => {
                let n = varint(&mut i) as usize;
                if key >> 3 == 6 {
                    strings.push(String::from_utf8_lossy(&b[i..i + n]).into_owned());
                }
                i += n;
            }
            1 => i += 8,
            5 => i += 4,
            w => panic!("wire type {w} in {}", pb.display()),
        }
    }
    strings.get(drop as usize).cloned().unwrap_or_default()
}

#[test]
fn redis_top_site_is_past_zmalloc_in_stats_and_pprof() {
    let dir = tempfile::Builder::new().prefix("itest-allocfn-").tempdir().unwrap();
    let log = recorded_redis(dir.path());
    // Left in, the wrappers are the top site: what the option is for.
    let raw = stats(&log, &["--alloc-fn", "none"]);
    assert!(is_zmalloc(&top_by_bytes(&raw)), "--alloc-fn none: top site {}", raw["sites"]["by_bytes"]);
    assert_eq!(raw["sites"]["past_wrappers"], 0);
    let s = stats(&log, &[]);
    let top = top_by_bytes(&s);
    assert!(!is_zmalloc(&top) && !top.starts_with("0x"), "default: top site {}", s["sites"]["by_bytes"]);
    assert!(s["sites"]["past_wrappers"].as_u64().unwrap() > 0, "{}", s["sites"]);
    // Folding moves sites, never bytes (each site's estimate is rounded on its own).
    let (a, b) = (
        s["sites"]["total_alloc_bytes"].as_u64().unwrap(),
        raw["sites"]["total_alloc_bytes"].as_u64().unwrap(),
    );
    assert!(a.abs_diff(b) <= 2 + b / 10_000, "{a} bytes against {b} unfolded");

    let pb = dir.path().join("heap.pb.gz");
    let mut c = command(shimlog_bin());
    c.arg("pprof").arg(&log).arg("-o").arg(&pb);
    run(c).assert_success("shimlog pprof");
    let d = drop_frames(&pb);
    assert!(
        d.contains("z(try)?(malloc|calloc|realloc)") && d.contains("x(malloc|") && d.contains("PyMem_"),
        "drop_frames: {d:?}"
    );
    let mut c = go();
    c.args(["tool", "pprof", "-top", "-sample_index=alloc_space"]).arg(&pb);
    let o = run(c);
    o.assert_success("go tool pprof -top");
    let text = o.stdout_str();
    // The first row after the header: flat flat% sum% cum cum% NAME.
    let first = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .nth(1)
        .unwrap_or_else(|| panic!("no rows in go tool pprof -top:\n{text}"));
    let name = first.split_whitespace().skip(5).collect::<Vec<_>>().join(" ");
    assert_eq!(name, top, "go tool pprof -top:\n{text}");

    // With --alloc-fn none, the profile has no drop_frames and pprof's top is the wrapper.
    let mut c = command(shimlog_bin());
    c.arg("pprof").arg(&log).arg("-o").arg(&pb).args(["--alloc-fn", "none"]);
    run(c).assert_success("shimlog pprof --alloc-fn none");
    assert_eq!(drop_frames(&pb), "");
}

#[test]
fn bad_expressions_are_one_line() {
    let dir = tempfile::Builder::new().prefix("itest-allocfn-").tempdir().unwrap();
    let log = recorded_redis(dir.path());
    for verb in ["stats", "pprof", "flamegraph", "export", "compare", "report"] {
        let mut c = command(shimlog_bin());
        c.arg(verb).arg(&log).args(["--alloc-fn", "zmalloc("]);
        match verb {
            "pprof" | "flamegraph" | "report" => c.arg("-o").arg(dir.path().join("out")),
            "export" => c.arg("-o").arg(dir.path().join("exp")),
            "compare" => c.arg("--vs").arg(&log),
            _ => &mut c,
        };
        let o = run(c);
        assert_eq!(o.status.code(), Some(2), "{verb}: {}", o.stderr);
        assert_eq!(o.stderr.trim().lines().count(), 1, "{verb}: {}", o.stderr);
        assert!(o.stderr.contains("--alloc-fn \"zmalloc(\""), "{verb}: {}", o.stderr);
    }
    // Every frame a wrapper: one line, the stacks left whole (the same sites as none).
    let mut c = command(shimlog_bin());
    c.arg("stats").arg(&log).args(["--top", "5", "--alloc-fn", ".*"]);
    let o = run(c);
    o.assert_success("shimlog stats --alloc-fn '.*'");
    let text = o.stdout_str();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("every frame")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    let all = stats(&log, &["--alloc-fn", ".*"]);
    assert_eq!(top_by_bytes(&all), top_by_bytes(&stats(&log, &["--alloc-fn", "none"])));
}
