//! Helpers for the integration tests: where libshim.so, shimlog and the C test programs
//! are, running a command with and without the shim (with a timeout), and reading the logs
//! it left back with the recorder crate.
//!
//! `libshim.so` and `shimlog` are taken from `$SHIM_LIB` / `$SHIMLOG_BIN` when set, else from
//! `<workspace>/target/release/` (what `cargo build --release` makes).
use recorder::{Event, Header, LogReader, Op};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use tempfile::TempDir;

pub mod sites;

/// Every backend the shim can forward to, as SHIM_BACKEND spells it (the one list, in the
/// settings table's crate).
pub const BACKENDS: [&str; 6] = shim_config::BACKENDS;

/// Calls the C runtime (and the dynamic loader) may make on a program's behalf, beyond the
/// ones the program itself counted.
pub const RUNTIME_SLACK: u64 = 16;

/// How long any one command may run before the test kills it and fails.
pub const TIMEOUT: Duration = Duration::from_secs(90);

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// A test that cannot run because of what the environment is, not what it lacks installed
/// (no cgroup controller to make a group in, no right to mount: a container), ends here:
/// the skip is written to the skip log (`$SHIM_TEST_SKIP_LOG`, else
/// `<workspace>/target/test-skips.log`; one line `KIND<TAB>TEST<TAB>WHY`), which `make test`
/// counts in its tally and fails on unless `SHIM_TEST_EXPECTED_SKIPS` names KIND. Kinds:
/// `cgroup`, `mount`, `root`, `repo`. A tool that is missing is no skip: see [`need`].
pub fn skip(kind: &str, why: &str) {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let path = std::env::var_os("SHIM_TEST_SKIP_LOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/test-skips.log"));
    let line = format!("{kind}\t{test}\t{}\n", why.replace(['\t', '\n'], " "));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("SKIPPED ({kind}: {why}), and the skip could not be written to {}: {e}", path.display());
    }
    eprintln!("SKIPPED ({kind}): {why}");
}

/// A tool a test needs and this machine lacks: the test fails, naming it and how to get it
/// (`make test` installs it first through tools/test-deps.sh).
pub fn need(what: &str, how: &str) -> ! {
    panic!("cannot run: {what} is missing ({how}; tools/test-deps.sh installs it)")
}

fn artifact(var: &str, name: &str) -> PathBuf {
    let p = match std::env::var_os(var) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => workspace_root().join("target/release").join(name),
    };
    assert!(
        p.is_file(),
        "{} not found: build it with `cargo build --release` or point {var} at it",
        p.display()
    );
    p
}

/// The shim library the tests preload.
pub fn shim_lib() -> PathBuf {
    artifact("SHIM_LIB", "libshim.so")
}

/// The shimlog binary.
pub fn shimlog_bin() -> PathBuf {
    artifact("SHIMLOG_BIN", "shimlog")
}

/// A C program that build.rs compiled from itest/programs/c/NAME.c (or workloads/NAME.c).
pub fn cprog(name: &str) -> PathBuf {
    let p = Path::new(env!("ITEST_CBIN")).join(name);
    assert!(p.is_file(), "{} was not built by itest/build.rs", p.display());
    p
}

/// What a finished command left.
pub struct Output {
    /// The pid of the process started (the first of the logs it leaves is its own).
    pub pid: u32,
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    /// The stdout parsed as one JSON document (panics with the text when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.stdout).unwrap_or_else(|e| {
            panic!("stdout is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout_str(), self.stderr)
        })
    }
    /// Each stdout line parsed as JSON.
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout_str()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }
    pub fn assert_success(&self, what: &str) {
        assert!(
            self.status.success(),
            "{what}: exited with {}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout_str(),
            self.stderr
        );
    }
}

/// A command to run, without environment from the test process that could change the
/// shim's behaviour (SHIM_*, LD_PRELOAD, MALLOC_CONF, MIMALLOC_*), its in-flight files (and
/// shimlog's `recover --all`) in this test binary's own directory ([`inflight_base`]), with
/// SHIM_INFLIGHT_MAX=off.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("SHIM_")
            || k == "LD_PRELOAD"
            || k == "MALLOC_CONF"
            || k == "_RJEM_MALLOC_CONF"
            || k.starts_with("MIMALLOC_")
        {
            c.env_remove(k);
        }
    }
    // In-flight files in this test binary's own directory, never the user's; and no program
    // recovers another's (tests run side by side: a test's dead process must stay as it left
    // it, and a recovery's line on stderr must not land in another test's output). The tests
    // of reclaiming (crash_loop.rs) set SHIM_INFLIGHT_MAX themselves.
    c.env("SHIM_INFLIGHT_DIR", inflight_base()).env("SHIM_INFLIGHT_MAX", "off");
    c
}

/// Runs `cmd` to completion with stdin closed, killing its whole process group after
/// [`TIMEOUT`] (and failing the test).
pub fn run(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    let shown = format!("{cmd:?}");
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    let pgid = child.id() as i32;
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
            panic!("{shown} did not finish within {TIMEOUT:?}; killed it");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = start.elapsed();
    // Children the command left behind in its group would hold the pipes open.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let stdout = t_out.join().expect("stdout reader");
    let stderr = String::from_utf8_lossy(&t_err.join().expect("stderr reader")).into_owned();
    Output { pid: pgid as u32, status, stdout, stderr, elapsed }
}

/// A run under the shim: its output, and the directory its logs went to.
pub struct Traced {
    pub out: Output,
    pub dir: TempDir,
}

impl Traced {
    /// Every file the run left in its log directory, sorted by name.
    pub fn logs(&self) -> Vec<PathBuf> {
        list_files(self.dir.path())
    }
    /// The run's only log (fails when there is not exactly one).
    pub fn only_log(&self) -> PathBuf {
        let logs = self.logs();
        assert_eq!(logs.len(), 1, "expected exactly one log, found {logs:?}\nstderr:\n{}", self.out.stderr);
        logs[0].clone()
    }
}

pub fn list_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read log dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        // A dead process's in-flight buffers (LOG.inflight) are not a log.
        .filter(|p| p.is_file() && p.extension().is_none_or(|x| x != "inflight"))
        .collect();
    v.sort();
    v
}

/// Sets the environment that preloads the shim with `backend`, logging into `dir`
/// (`dir/%e.%p.shimlog`).
pub fn preload(cmd: &mut Command, backend: &str, dir: &Path) {
    cmd.env("LD_PRELOAD", shim_lib()).env("SHIM_BACKEND", backend).env("SHIM_LOG", dir.join("%e.%p.shimlog"));
}

/// A directory on tmpfs for the in-flight files of the programs this test binary runs
/// (`SHIM_INFLIGHT_DIR`; the shim makes `shim-UID` in it), so that the tests never touch the
/// user's own in-flight files in /dev/shm, nor reclaim another run's. Made once per test
/// binary as `/dev/shm/itest-inflight-PID`; those of test binaries no longer running are
/// removed. Fails naming what is missing when /dev/shm is not a tmpfs.
pub fn inflight_base() -> PathBuf {
    static BASE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        assert!(is_tmpfs(shm), "/dev/shm is not a tmpfs: the in-flight tests need one");
        if let Ok(rd) = std::fs::read_dir(shm) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = name.strip_prefix("itest-inflight-").and_then(|p| p.parse::<i32>().ok())
                else {
                    continue;
                };
                if unsafe { libc::kill(pid, 0) } != 0
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
                {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let p = shm.join(format!("itest-inflight-{}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("cannot make {}: {e}", p.display()));
        p
    })
    .clone()
}

/// A fresh directory on tmpfs (/dev/shm) of the test's own, removed when dropped: a private
/// `SHIM_INFLIGHT_DIR`. Fails naming what is missing when /dev/shm is not a tmpfs.
pub fn private_inflight_base() -> TempDir {
    let shm = Path::new("/dev/shm");
    assert!(is_tmpfs(shm), "/dev/shm is not a tmpfs: the in-flight tests need one");
    tempfile::Builder::new().prefix("itest-inflight-private-").tempdir_in(shm).expect("tempdir in /dev/shm")
}

fn is_tmpfs(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.to_string_lossy().as_bytes()) else { return false };
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut fs) == 0 && fs.f_type == libc::TMPFS_MAGIC }
}

/// A program of itest/programs/ownalloc or workloads/validator, as `make ownalloc` builds them into
/// `<workspace>/target/ownalloc/bin` (or `$OWNALLOC_BIN`).
pub fn ownalloc_bin(name: &str) -> PathBuf {
    let dir = match std::env::var_os("OWNALLOC_BIN") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => workspace_root().join("target/ownalloc/bin"),
    };
    let p = dir.join(name);
    assert!(
        p.is_file(),
        "{} not found: build the programs that bring their own allocator with `make ownalloc` \
         (itest/programs/ownalloc/build.sh and the validator variants; `make test` does it first)",
        p.display()
    );
    p
}

/// [`run_traced`] with SHIM_BACKEND set to `backend`, or left unset when `None` (a program that
/// brings its own allocator keeps it).
pub fn run_traced_mode(backend: Option<&str>, make: impl FnOnce() -> Command) -> Traced {
    let dir = tempfile::Builder::new().prefix("itest-logs-").tempdir().expect("tempdir");
    let mut cmd = make();
    cmd.env("LD_PRELOAD", shim_lib()).env("SHIM_LOG", dir.path().join("%e.%p.shimlog"));
    if let Some(b) = backend {
        cmd.env("SHIM_BACKEND", b);
    }
    let out = run(cmd);
    Traced { out, dir }
}

/// Runs the command `make()` builds under the shim with `backend`, logs in a fresh directory.
pub fn run_traced(backend: &str, make: impl FnOnce() -> Command) -> Traced {
    let dir = tempfile::Builder::new().prefix("itest-logs-").tempdir().expect("tempdir");
    let mut cmd = make();
    preload(&mut cmd, backend, dir.path());
    let out = run(cmd);
    Traced { out, dir }
}

/// `shimlog dump LOG --format jsonl`, parsed.
pub fn dump_jsonl(log: &Path) -> Vec<serde_json::Value> {
    let mut c = command(shimlog_bin());
    c.arg("dump").arg(log).args(["--format", "jsonl"]);
    let out = run(c);
    out.assert_success("shimlog dump --format jsonl");
    out.stdout_str()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("dump line is not JSON ({e}): {l}")))
        .collect()
}

/// What reading a whole log found. Built in one streaming pass; only the events the caller
/// asked to keep are held.
#[derive(Default)]
pub struct Analysis {
    pub path: PathBuf,
    pub header: Header,
    /// Problems found while indexing and while decoding (one line each).
    pub issues: Vec<String>,
    pub clean_end: bool,
    pub events: u64,
    /// Events per operation name (allocation ops and process/thread records alike).
    pub ops: BTreeMap<&'static str, u64>,
    /// Tids seen in thread_start records.
    pub threads: HashSet<u32>,
    /// A free / realloc of a non-null pointer that was not live (first few kept).
    pub unmatched_frees: u64,
    pub unmatched_examples: Vec<Event>,
    /// An allocation returning an address that was still live.
    pub double_live: u64,
    /// The one reordering the log format allows (README, "Known limits"): a realloc is
    /// stamped once, after it returns, so a block it released can show up in another
    /// thread's allocation first. Such pairs (resolved when the realloc turns up) are
    /// counted here, not as failures.
    pub realloc_races: u64,
    pub double_examples: Vec<Event>,
    /// An aligned allocation whose result is not aligned as asked (or valloc/pvalloc not
    /// page-aligned).
    pub misaligned: u64,
    pub misaligned_examples: Vec<Event>,
    /// Blocks live at the end: address -> (requested bytes, allocating tid).
    pub live: HashMap<u64, (u64, u32)>,
    /// For blocks whose allocation was kept: (allocating tid, freeing tid) -> count.
    pub kept_pairs: HashMap<(u32, u32), u64>,
    /// Blocks live at the end whose allocation was kept.
    pub kept_live: HashSet<u64>,
    /// The events `keep` selected, in log order.
    pub kept: Vec<Event>,
    /// Allocation-family events with a backend time.
    pub timed: u64,
    pub alloc_events: u64,
}

impl Analysis {
    pub fn count(&self, op: &str) -> u64 {
        self.ops.get(op).copied().unwrap_or(0)
    }
    /// What is wrong with the log: read issues, an address live twice, a misaligned result,
    /// or (`strict`) a free of an address the log never showed allocated.
    pub fn consistency_failures(&self, strict: bool) -> Vec<String> {
        let p = self.path.display();
        let mut v = Vec::new();
        if !self.issues.is_empty() {
            v.push(format!("{p}: read issues: {:?}", self.issues));
        }
        if self.double_live > 0 {
            v.push(format!(
                "{p}: {} allocations returned an address still live, e.g. {:?}",
                self.double_live, self.double_examples
            ));
        }
        if self.misaligned > 0 {
            v.push(format!(
                "{p}: {} misaligned results, e.g. {:?}",
                self.misaligned, self.misaligned_examples
            ));
        }
        if strict && self.unmatched_frees > 0 {
            v.push(format!(
                "{p}: {} frees of addresses not live in the log, e.g. {:?}",
                self.unmatched_frees, self.unmatched_examples
            ));
        }
        v
    }

    /// Panics on any of [`Analysis::consistency_failures`].
    pub fn assert_consistent(&self, strict: bool) {
        let f = self.consistency_failures(strict);
        assert!(f.is_empty(), "{}", f.join("\n"));
    }
}

const EXAMPLES: usize = 5;

/// Reads the log at `path` and checks every event against a model of the live blocks.
/// Panics when the log cannot be opened.
pub fn analyze(path: &Path, keep: impl Fn(&Event) -> bool) -> Analysis {
    analyze_opts(path, keep, true)
}

/// [`analyze`], keeping the selected events in `kept` only when `store` (the pairs and
/// live set of the selected blocks are tracked either way).
pub fn analyze_opts(path: &Path, keep: impl Fn(&Event) -> bool, store: bool) -> Analysis {
    let r = LogReader::open(path.to_str().expect("utf-8 path"))
        .unwrap_or_else(|e| panic!("cannot open log {}: {e}", path.display()));
    let mut a = Analysis {
        path: path.to_path_buf(),
        header: r.header.clone(),
        issues: r.issues.iter().map(|i| i.to_string()).collect(),
        ..Default::default()
    };
    let page = r.header.page_size.max(1);
    let mut events = r.events();
    // Blocks displaced by an allocation that returned their address: (tid, kept).
    let mut contested: HashMap<u64, (u32, bool)> = HashMap::new();
    let mut contested_by: HashMap<u64, Event> = HashMap::new();
    for e in &mut events {
        a.events += 1;
        *a.ops.entry(e.op.name()).or_default() += 1;
        if e.op == Op::ThreadStart {
            a.threads.insert(e.tid);
        }
        if !e.op.is_alloc_family() {
            continue;
        }
        a.alloc_events += 1;
        if e.backend_ns().is_some() {
            a.timed += 1;
        }
        let k = keep(&e);
        if k && store {
            a.kept.push(e);
        }
        // The block given back, if any.
        let freed = match e.op {
            Op::Free | Op::FreeSized if e.ptr != 0 => Some(e.ptr),
            Op::Realloc | Op::Reallocarray if e.old != 0 && (e.ptr != 0 || e.requested() == 0) => Some(e.old),
            _ => None,
        };
        if let Some(p) = freed {
            let late_realloc = matches!(e.op, Op::Realloc | Op::Reallocarray) && contested.contains_key(&p);
            if late_realloc {
                // The displaced owner's realloc, stamped after another thread got its block.
                let (tid, kept) = contested.remove(&p).unwrap_or_default();
                a.realloc_races += 1;
                if kept {
                    *a.kept_pairs.entry((tid, e.tid)).or_default() += 1;
                }
            } else {
                match a.live.remove(&p) {
                    Some((_, tid)) => {
                        if a.kept_live.remove(&p) {
                            *a.kept_pairs.entry((tid, e.tid)).or_default() += 1;
                        }
                    }
                    None => {
                        a.unmatched_frees += 1;
                        if a.unmatched_examples.len() < EXAMPLES {
                            a.unmatched_examples.push(e);
                        }
                    }
                }
            }
        }
        if e.op.allocates() && e.ptr != 0 {
            let want = match e.op {
                Op::PosixMemalign | Op::AlignedAlloc | Op::Memalign => e.align().max(1).next_power_of_two(),
                Op::Valloc | Op::Pvalloc => page,
                _ => 1,
            };
            if e.ptr % want != 0 {
                a.misaligned += 1;
                if a.misaligned_examples.len() < EXAMPLES {
                    a.misaligned_examples.push(e);
                }
            }
            if let Some((_, tid)) = a.live.insert(e.ptr, (e.requested(), e.tid)) {
                // Live twice, unless the previous owner's realloc turns up later (the one
                // reordering the format allows): settled at the end.
                contested.insert(e.ptr, (tid, a.kept_live.contains(&e.ptr)));
                contested_by.insert(e.ptr, e);
            }
            if k {
                a.kept_live.insert(e.ptr);
            } else {
                a.kept_live.remove(&e.ptr);
            }
        }
    }
    for (p, _) in contested {
        a.double_live += 1;
        if a.double_examples.len() < EXAMPLES {
            a.double_examples.extend(contested_by.get(&p).copied());
        }
    }
    a.issues.extend(events.issues.iter().map(|i| i.to_string()));
    a.clean_end = events.clean_end;
    a
}

/// Analyses every log of a traced run, in file-name order.
pub fn analyze_all(t: &Traced, keep: impl Fn(&Event) -> bool + Copy) -> Vec<Analysis> {
    t.logs().iter().map(|p| analyze(p, keep)).collect()
}

/// The real path of an interpreter found on PATH (resolving wrapper scripts such as
/// pyenv's shims by asking the interpreter itself).
pub fn python3() -> PathBuf {
    let out = run({
        let mut c = command("python3");
        c.args(["-c", "import sys; print(sys.executable)"]);
        c
    });
    out.assert_success("python3 -c 'print(sys.executable)'");
    let p = PathBuf::from(out.stdout_str().trim());
    assert!(p.is_file(), "python3 reports {} as its executable, which is not a file", p.display());
    p
}

/// Collects failed checks so that a test reports all of them at once.
#[derive(Default)]
pub struct Checks {
    pub failed: Vec<String>,
}

impl Checks {
    pub fn new() -> Self {
        Checks::default()
    }
    pub fn check(&mut self, ok: bool, msg: impl FnOnce() -> String) {
        if !ok {
            self.failed.push(msg());
        }
    }
    /// `got` must lie in `want ..= want + slack`.
    pub fn within(&mut self, what: &str, got: u64, want: u64, slack: u64) {
        self.check(got >= want && got <= want + slack, || {
            format!(
                "{what}: the log has {got}, the program made {want} (allowed up to {} for the C runtime's own calls)",
                want + slack
            )
        });
    }
    pub fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        self.check(got == want, || format!("{what}: got {got:?}, want {want:?}"));
    }
    /// Panics listing every failed check.
    pub fn finish(self, context: &str) {
        assert!(self.failed.is_empty(), "{context}:\n  - {}", self.failed.join("\n  - "));
    }
}
