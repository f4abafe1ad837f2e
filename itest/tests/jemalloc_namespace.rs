//! jemalloc's whole mallctl namespace when another backend serves a program's jemalloc
//! (issue 41): the differential conformance of backend/src/emulate/jemalloc.rs against the
//! real jemalloc, Debian's libjemalloc.so.2.
//!
//! - itest/programs/c/jemalloc_walk.c (linked with -ljemalloc) walks every name of jemalloc
//!   5.3.0's src/ctl.c (backend/src/emulate/jemalloc-5.3.0-ctl.txt, generated from ctl.c by
//!   tools/jemalloc-ctl-names.py) over every index of every indexed node, by name and by MIB,
//!   reading, re-reading at the value's size and writing back what it read. Bare, jemalloc
//!   answers; under the shim switched to glibc, mimalloc, tcmalloc, snmalloc or rpmalloc, the
//!   emulation does. Name for name they must agree: mallctlnametomib's code and MIB, every
//!   return code and every size (so a success wherever jemalloc succeeds, and the same error
//!   where it fails). One difference is by design: Debian builds jemalloc with profiling, the
//!   emulation answers as a default build without it, so the names ctl.c guards with
//!   `config_prof` are found but ENOENT (the emulation's unit tests check those against the
//!   shim's own jemalloc, built without profiling). The values of jemalloc's own tables
//!   (size classes, bins, slabs, quantum, page) must be the real ones; the statistics must be
//!   consistent (curregs <= nregs * curslabs in every bin, allocated <= active <= resident
//!   <= mapped).
//! - `jemalloc_walk redis` reads the fragmentation as Redis' and Valkey's zmalloc.c do, with
//!   their asserts, bare and switched to every backend.
//! - c_je_defrag (itest/programs/ownalloc/defrag_hint.c): Redis' je_get_defrag_hint is the
//!   program's own in its own mode, and answered by the shim ("keep it") when switched.
//! - Debian's redis-server switched to mimalloc serves a redis-benchmark burst and answers
//!   INFO memory with consistent allocator figures (which come from the emulation).
use itest::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn names_file() -> PathBuf {
    workspace_root().join("backend/src/emulate/jemalloc-5.3.0-ctl.txt")
}

/// The name patterns ctl.c guards with `config_prof` (the file's third column).
fn prof_patterns() -> Vec<String> {
    std::fs::read_to_string(names_file())
        .expect("read jemalloc-5.3.0-ctl.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() == 3 && f[2].contains("config_prof")).then(|| f[0].to_string())
        })
        .collect()
}

/// Whether `name` is an expansion of `pattern` ({INDEX} elements match any number).
fn expands(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), name.split('.').collect());
    p.len() == n.len()
        && p.iter().zip(&n).all(|(p, n)| p == n || (p.starts_with('{') && n.parse::<u64>().is_ok()))
}

/// One walk: name -> (field -> value), in the walk's order.
type Walk = Vec<(String, BTreeMap<String, String>)>;

fn parse(out: &Output, what: &str) -> Walk {
    out.assert_success(what);
    let text = out.stdout_str();
    let walk: Walk = text
        .lines()
        .map(|l| {
            let mut f = l.split('\t');
            let name = f.next().unwrap_or_default().to_string();
            let fields = f
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>();
            assert_eq!(fields.len(), 7, "{what}: a short line: {l}");
            (name, fields)
        })
        .collect();
    assert!(walk.len() > 9000, "{what}: only {} names walked", walk.len());
    walk
}

fn walk_cmd() -> std::process::Command {
    let mut c = command(cprog("jemalloc_walk"));
    c.arg("walk").arg(names_file());
    c
}

/// The values that are jemalloc's own tables, the same whoever serves.
fn structural(name: &str) -> bool {
    let idx = |prefix: &str, limit: u64| {
        name.strip_prefix(prefix)
            .and_then(|r| r.split('.').next())
            .and_then(|i| i.parse::<u64>().ok())
            .is_some_and(|i| i < limit)
    };
    matches!(
        name,
        "arenas.quantum"
            | "arenas.page"
            | "arenas.tcache_max"
            | "arenas.nbins"
            | "arenas.nhbins"
            | "arenas.nlextents"
    ) || idx("arenas.bin.", 36)
        || idx("arenas.lextent.", 196)
}

fn value(w: &Walk, name: &str) -> u64 {
    let (_, f) = w.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} not walked"));
    f["v"].parse().unwrap_or_else(|_| panic!("{name}: no value read: {f:?}"))
}

fn conforms(backend: &str) {
    let real = parse(&run(walk_cmd()), "jemalloc_walk bare (Debian's jemalloc)");
    let t = run_traced_mode(Some(backend), walk_cmd);
    let emu = parse(&t.out, &format!("jemalloc_walk switched to {backend}"));
    assert_eq!(
        real.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        emu.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        "the two walks asked different names"
    );
    let prof = prof_patterns();
    assert!(prof.len() > 20, "too few profiling names in the names file: {prof:?}");
    let mut bad = Vec::new();
    let mut prof_seen = 0;
    for ((name, r), (_, e)) in real.iter().zip(&emu) {
        if prof.iter().any(|p| expands(p, name)) {
            // Found where jemalloc finds it, ENOENT when asked (a build without profiling).
            prof_seen += 1;
            let ok = e["n"] == r["n"]
                && e["r"].starts_with("2:")
                && (e["m"] == "-" || e["m"].starts_with("2:"))
                && e["x"] == "-"
                && e["w"] == "-";
            if !ok {
                bad.push(format!("{name} (profiling): jemalloc {r:?}, emulated {e:?}"));
            }
            continue;
        }
        for k in ["n", "r", "x", "m", "mx", "w"] {
            if r[k] != e[k] {
                bad.push(format!("{name}: {k} is {} under jemalloc, {} emulated on {backend}", r[k], e[k]));
            }
        }
        if structural(name) && r["v"] != e["v"] {
            bad.push(format!("{name}: jemalloc's value is {}, emulated {}", r["v"], e["v"]));
        }
    }
    assert!(prof_seen > 20, "only {prof_seen} profiling names walked");
    // The emulation's figures are consistent.
    let s = |n: &str| value(&emu, n);
    let (al, ac, re, ma) = (s("stats.allocated"), s("stats.active"), s("stats.resident"), s("stats.mapped"));
    if !(al <= ac && ac <= re && re <= ma) {
        bad.push(format!("allocated {al}, active {ac}, resident {re}, mapped {ma}: not in jemalloc's order"));
    }
    for arena in [0, 4096] {
        for j in 0..s("arenas.nbins") {
            let nregs = s(&format!("arenas.bin.{j}.nregs"));
            let curregs = s(&format!("stats.arenas.{arena}.bins.{j}.curregs"));
            let curslabs = s(&format!("stats.arenas.{arena}.bins.{j}.curslabs"));
            if curregs > nregs * curslabs {
                bad.push(format!(
                    "bin {j} of arena {arena}: {curregs} regions in {curslabs} slabs of {nregs}"
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} names answered otherwise than jemalloc when {backend} serves:\n{}\nstderr:\n{}",
        bad.len(),
        real.len(),
        bad.iter().take(60).cloned().collect::<Vec<_>>().join("\n"),
        t.out.stderr
    );
}

/// `jemalloc_walk redis`: Redis' fragmentation read, its asserts holding.
fn redis_read(backend: Option<&str>) {
    let what = format!("jemalloc_walk redis, {}", backend.unwrap_or("bare"));
    let make = || {
        let mut c = command(cprog("jemalloc_walk"));
        c.arg("redis");
        c
    };
    let out = match backend {
        None => run(make()),
        Some(b) => run_traced_mode(Some(b), make).out,
    };
    out.assert_success(&what);
    let j = out.json();
    assert_eq!(j["nbins"], 36, "{what}: {j}");
    assert_eq!(j["bins_consistent"], true, "{what}: {j}");
    let n = |k: &str| j[k].as_u64().unwrap_or_else(|| panic!("{what}: no {k} in {j}"));
    // The burst: 36 bins x 256 live blocks, some MiB.
    assert!(n("allocated") >= 1 << 20, "{what}: allocated {}: {j}", n("allocated"));
    assert!(n("allocated") <= n("active") && n("active") <= n("resident"), "{what}: {j}");
}

macro_rules! per_backend {
    ($($b:ident),*) => {
        mod walk {
            use super::*;
            $(#[test] fn $b() { conforms(stringify!($b)) })*
        }
        mod redis_fragmentation {
            use super::*;
            #[test] fn bare() { redis_read(None) }
            $(#[test] fn $b() { redis_read(Some(stringify!($b))) })*
        }
    };
}
per_backend!(glibc, mimalloc, tcmalloc, snmalloc, rpmalloc);

/// Redis' je_get_defrag_hint: the program's own in its own mode (it moves some blocks),
/// the shim's when switched (none move, the program's function is never called).
#[test]
fn defrag_hint() {
    let bin = ownalloc_bin("c_je_defrag");
    let own = run_traced_mode(None, || command(&bin));
    own.out.assert_success("c_je_defrag, own mode");
    let j = own.out.json();
    assert!(
        j["own_hint_calls"] == j["blocks"] && j["move"].as_u64().unwrap_or(0) > 0,
        "own mode: the program's je_get_defrag_hint should answer, and move some blocks: {j}"
    );
    for b in ["glibc", "jemalloc", "mimalloc", "tcmalloc", "snmalloc", "rpmalloc"] {
        let t = run_traced_mode(Some(b), || command(&bin));
        t.out.assert_success(&format!("c_je_defrag switched to {b}"));
        let j = t.out.json();
        assert!(
            j["own_hint_calls"] == 0 && j["move"] == 0 && j["blocks"].as_u64().unwrap_or(0) > 1000,
            "switched to {b}: the shim answers je_get_defrag_hint (keep every block): {j}\nstderr:\n{}",
            t.out.stderr
        );
    }
}

/// Debian's redis-server switched to mimalloc: a redis-benchmark burst, then INFO memory
/// with the allocator's figures from the emulation, consistent; it exits 0.
#[test]
fn redis_server_switched_to_mimalloc() {
    use std::net::TcpListener;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let tool = |name: &str| {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join(name))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{name} not found on PATH: install Debian's redis-server and redis-tools (tools/test-deps.sh)"))
    };
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port().to_string();
    let dir = tempfile::Builder::new().prefix("itest-redis-").tempdir().expect("tempdir");
    let errf = dir.path().join("server.stderr");
    let mut server = command(tool("redis-server"))
        .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir.path())
        .env("LD_PRELOAD", shim_lib())
        .env("SHIM_BACKEND", "mimalloc")
        .env("SHIM_LOG", dir.path().join("redis.%p.shimlog"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&errf).expect("stderr file"))
        .spawn()
        .expect("start redis-server");
    let log = || std::fs::read_to_string(&errf).unwrap_or_default();
    let cli = |args: &[&str]| {
        let out = command(tool("redis-cli"))
            .args(["-h", "127.0.0.1", "-p", &port])
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let t0 = Instant::now();
    while cli(&["PING"]).map(|o| o.trim() != "PONG").unwrap_or(true) {
        if let Ok(Some(st)) = server.try_wait() {
            panic!("redis-server switched to mimalloc exited at start-up with {st}:\n{}", log());
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "redis-server never answered PING:\n{}", log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut bench = command(tool("redis-benchmark"));
    bench.args([
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "set,get,lpush,lpop",
        "-n",
        "20000",
        "-d",
        "256",
        "-q",
    ]);
    run(bench).assert_success("redis-benchmark against redis-server switched to mimalloc");
    let info = cli(&["INFO", "memory"]).unwrap_or_default();
    let field = |k: &str| -> u64 {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{k}:")).and_then(|v| v.parse().ok()))
            .unwrap_or_else(|| panic!("INFO memory has no {k}:\n{info}\nserver:\n{}", log()))
    };
    let (al, ac, re) = (field("allocator_allocated"), field("allocator_active"), field("allocator_resident"));
    assert!(al > 0 && al <= ac && ac <= re, "INFO memory's allocator figures: {al} {ac} {re}\n{info}");
    let _ = cli(&["SHUTDOWN", "NOSAVE"]);
    let t0 = Instant::now();
    let st = loop {
        if let Ok(Some(st)) = server.try_wait() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = server.kill();
            panic!("redis-server did not exit after SHUTDOWN NOSAVE:\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(st.success(), "redis-server switched to mimalloc exited with {st}:\n{}", log());
}
