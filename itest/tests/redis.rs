//! Debian's redis-server, linked dynamically against Debian's libjemalloc.so.2 (which calls
//! `malloc_usable_size`, `mallctl`, `nallocx` and `malloc_stats_print` of it directly), under
//! the shim: in the default mode (its jemalloc kept, every call recorded), forwarding only
//! (`SHIM_TRACE=0`), and switched to each backend. Each time it serves redis-benchmark (set,
//! get, lpush, lpop), answers INFO memory and MEMORY STATS, and exits 0 on SHUTDOWN NOSAVE.
//! Recorded, its log holds the calls its jemalloc served, as many as jemalloc itself counts.
use itest::*;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A program the test needs, found on PATH; the test fails naming the package when it is not.
fn tool(name: &str) -> PathBuf {
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let p = dir.join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("{name} not found on PATH: install Debian's redis-server and redis-tools (apt-get install redis-server redis-tools; .ci/run does)");
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// The server, killed (with its log left as it is) if the test ends before it exits.
struct Server {
    child: Option<Child>,
    port: u16,
    stderr: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// redis-server on a free loopback port, with `env` on top of the shim's preload (logs into
/// `dir`), once it answers PING.
fn start(env: &[(&str, &str)], dir: &Path) -> Server {
    let port = free_port();
    let stderr = dir.join("server.stderr");
    let mut cmd = command(tool("redis-server"));
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--dir", dir.to_str().expect("utf-8 dir")])
        .env("LD_PRELOAD", shim_lib())
        .env("SHIM_LOG", dir.join("redis.%p.shimlog"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("stderr file"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("start redis-server");
    let mut s = Server { child: Some(child), port, stderr };
    let t0 = Instant::now();
    loop {
        if cli(&s, &["PING"]).map(|o| o.trim() == "PONG").unwrap_or(false) {
            return s;
        }
        if let Some(st) = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
            panic!("redis-server ({env:?}) exited at start-up with {st}:\n{}", s.stderr_text());
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "redis-server ({env:?}) never answered PING:\n{}",
            s.stderr_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Server {
    fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
    /// SHUTDOWN NOSAVE, then the server's exit status.
    fn shutdown(&mut self) -> std::process::ExitStatus {
        let _ = cli(self, &["SHUTDOWN", "NOSAVE"]);
        let mut c = self.child.take().expect("running");
        let t0 = Instant::now();
        loop {
            if let Some(st) = c.try_wait().expect("wait") {
                return st;
            }
            if t0.elapsed() > Duration::from_secs(20) {
                let _ = c.kill();
                panic!("redis-server did not exit after SHUTDOWN NOSAVE:\n{}", self.stderr_text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// redis-cli's answer to one command (None when it failed).
fn cli(s: &Server, args: &[&str]) -> Option<String> {
    let mut cmd = command(tool("redis-cli"));
    cmd.args(["-h", "127.0.0.1", "-p", &s.port.to_string()]).args(args);
    let out = cmd.stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// redis-benchmark's set, get, lpush and lpop, each answered at some rate.
fn benchmark(s: &Server, what: &str) {
    let mut cmd = command(tool("redis-benchmark"));
    cmd.args(["-h", "127.0.0.1", "-p", &s.port.to_string(), "-t", "set,get,lpush,lpop", "-n", "20000", "-q"]);
    let out = run(cmd);
    out.assert_success(&format!("redis-benchmark ({what})"));
    let text = out.stdout_str().replace('\r', "\n");
    for t in ["SET", "GET", "LPUSH", "LPOP"] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{t}: ")) && l.contains("requests per second")),
            "redis-benchmark ({what}) has no {t} rate:\n{text}\nserver:\n{}",
            s.stderr_text()
        );
    }
}

/// One whole run: start, benchmark, INFO memory, MEMORY STATS, SHUTDOWN NOSAVE. The logs it
/// left (none without recording).
fn serve(env: &[(&str, &str)]) -> (TempDir, Vec<PathBuf>) {
    let dir = tempfile::Builder::new().prefix("itest-redis-").tempdir().expect("tempdir");
    let mut s = start(env, dir.path());
    benchmark(&s, &format!("{env:?}"));
    let info = cli(&s, &["INFO", "memory"]).unwrap_or_default();
    assert!(info.contains("used_memory:"), "INFO memory ({env:?}) answered {info:?}");
    let stats = cli(&s, &["MEMORY", "STATS"]).unwrap_or_default();
    assert!(stats.contains("peak.allocated"), "MEMORY STATS ({env:?}) answered {stats:?}");
    let st = s.shutdown();
    assert!(
        st.success(),
        "redis-server ({env:?}) exited with {st} after SHUTDOWN NOSAVE:\n{}",
        s.stderr_text()
    );
    let logs: Vec<PathBuf> = list_files(dir.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "shimlog"))
        .collect();
    (dir, logs)
}

/// The log's header names the program's jemalloc in `mode`, and the log reads back whole.
fn check_log(logs: &[PathBuf], backend: &str, mode: &str) -> Analysis {
    assert_eq!(logs.len(), 1, "one log expected: {logs:?}");
    let a = analyze(&logs[0], |_| false);
    a.assert_consistent(false);
    assert!(a.clean_end, "{}: the log was not closed cleanly", logs[0].display());
    assert_eq!(a.header.backend, backend, "header backend");
    let own = &a.header.own_allocators;
    assert!(
        own.iter().any(|o| o.family == "jemalloc" && o.file.contains("libjemalloc.so") && o.mode == mode),
        "the header should name libjemalloc.so's jemalloc, {mode}: {own:?}"
    );
    assert!(a.count("malloc") > 100_000, "too few mallocs recorded: {:?}", a.ops);
    a
}

#[test]
fn own_allocator_recorded_by_default() {
    let (_dir, logs) = serve(&[]);
    check_log(&logs, "own", "recorded");
}

#[test]
fn forwarding_only() {
    let (_dir, logs) = serve(&[("SHIM_TRACE", "0")]);
    assert!(logs.is_empty(), "SHIM_TRACE=0 writes no log: {logs:?}");
}

macro_rules! switched {
    ($($name:ident),*) => {$(
        #[test]
        fn $name() {
            let b = stringify!($name);
            let (_dir, logs) = serve(&[("SHIM_BACKEND", b)]);
            check_log(&logs, b, "switched");
        }
    )*};
}
switched!(glibc, jemalloc, mimalloc, tcmalloc, snmalloc, rpmalloc);

/// Recorded in the default mode, the log holds every allocation jemalloc served: jemalloc's
/// own count of requests (MEMORY MALLOC-STATS, merged arenas, with its thread caches off so
/// that every request is counted where the statistics read it) lies between the log's
/// allocations and those plus its reallocs (a realloc that moves is one more request), 1%
/// either way; the log goes on past the statistics to the shutdown.
#[test]
fn own_mode_counts_what_jemalloc_served() {
    let dir = tempfile::Builder::new().prefix("itest-redis-").tempdir().expect("tempdir");
    let mut s = start(&[("MALLOC_CONF", "tcache:false")], dir.path());
    benchmark(&s, "counts");
    let ms = cli(&s, &["MEMORY", "MALLOC-STATS"]).unwrap_or_default();
    let st = s.shutdown();
    assert!(st.success(), "exit {st}:\n{}", s.stderr_text());
    let merged =
        ms.split("Merged arenas stats:").nth(1).unwrap_or_else(|| panic!("no merged arenas in:\n{ms}"));
    // "total:  allocated nmalloc (#/sec) ndalloc (#/sec) nrequests (#/sec) ..."
    let total = merged
        .lines()
        .find(|l| l.starts_with("total:"))
        .unwrap_or_else(|| panic!("no total line:\n{merged}"));
    let cols: Vec<u64> = total.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    let nrequests = *cols.get(5).unwrap_or_else(|| panic!("short total line: {total}")) as f64;
    let logs: Vec<PathBuf> = list_files(dir.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "shimlog"))
        .collect();
    let a = check_log(&logs, "own", "recorded");
    let allocs = ["malloc", "calloc", "posix_memalign", "aligned_alloc", "memalign", "mallocx"]
        .iter()
        .map(|o| a.count(o))
        .sum::<u64>() as f64;
    let reallocs = (a.count("realloc") + a.count("rallocx")) as f64;
    assert!(
        allocs <= nrequests * 1.01 && nrequests <= (allocs + reallocs) * 1.01,
        "jemalloc served {nrequests} requests; the log has {allocs} allocations and {reallocs} reallocs: {:?}",
        a.ops
    );
}
