//! `shimlog attach PID`: the ptrace loader against real running programs (attach_target.c:
//! threads that call malloc and free in a loop and count their own calls), and the one-line
//! refusals (exit 2) for what this machine can make: a static executable, a process another
//! tracer holds, a process that does not exist.
use itest::*;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

struct Target {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Target {
    fn start(exe: &std::path::Path, threads: u32) -> Target {
        let mut child = Command::new(exe)
            .arg(threads.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("ready line");
        assert!(line.starts_with("ready"), "{line}");
        Target { child, out }
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    /// The program's own counts (SIGUSR1, one line back).
    fn calls(&mut self) -> (u64, u64) {
        unsafe { libc::kill(self.pid() as i32, libc::SIGUSR1) };
        let mut line = String::new();
        self.out.read_line(&mut line).expect("calls line");
        let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|w| w.parse().ok()).collect();
        assert_eq!(v.len(), 2, "{line:?}");
        (v[0], v[1])
    }
    fn maps(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/maps", self.pid())).unwrap_or_default()
    }
    /// SIGTERM: it prints its counts and exits 0 (a program the attach broke would not).
    fn finish(mut self) -> (u64, u64) {
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        let mut line = String::new();
        self.out.read_line(&mut line).expect("last calls line");
        let st = self.child.wait().expect("wait");
        assert!(st.success(), "the program ended {st} after the attach");
        let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|w| w.parse().ok()).collect();
        (v[0], v[1])
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn attach(pid: u32, lib: Option<&str>) -> Output {
    let mut cmd = command(shimlog_bin());
    cmd.arg("attach").arg(pid.to_string());
    if let Some(l) = lib {
        cmd.args(["--library", l]);
    }
    run(cmd)
}

/// A library the program does not load itself, from Debian's zlib1g.
fn zlib() -> String {
    let p = "/usr/lib/x86_64-linux-gnu/libz.so.1";
    if !std::path::Path::new(p).exists() {
        need("libz.so.1", "apt-get install zlib1g");
    }
    std::fs::canonicalize(p).unwrap().to_string_lossy().into_owned()
}

#[test]
fn loads_a_library_into_a_busy_program_that_runs_on() {
    let z = zlib();
    let mut t = Target::start(&cprog("attach_target"), 8);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!t.maps().contains(&z), "the program had zlib before the attach");
    let before = t.calls();
    let o = attach(t.pid(), Some(&z));
    assert!(o.status.success(), "attach failed: {}\n{}", o.stderr, o.stdout_str());
    let line = o.stdout_str();
    // "... its 9 thread(s) paused 1.23 ms"
    assert!(line.contains("its 9 thread(s) paused"), "{line}");
    let ms: f64 = line
        .split("paused ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no pause in {line:?}"));
    assert!(ms > 0.0 && ms < 2000.0, "pause {ms} ms");
    eprintln!("{}", line.trim());
    assert!(t.maps().contains(&z), "zlib is not in the program's maps after the attach");
    // It goes on calling malloc and free, from every thread, as before.
    std::thread::sleep(Duration::from_millis(300));
    let after = t.calls();
    assert!(after.0 > before.0 + 1000 && after.1 > before.1 + 1000, "{before:?} -> {after:?}");
    // A second attach of the same library: the loader's count goes up, nothing else.
    let o = attach(t.pid(), Some(&z));
    assert!(o.status.success(), "second attach failed: {}", o.stderr);
    let (m, f) = t.finish();
    assert!(m >= after.0 && f >= after.1 && m.abs_diff(f) <= 8, "{m} mallocs, {f} frees");
}

#[test]
fn attach_to_a_program_sleeping_in_system_calls_restarts_them() {
    // `sleep` spends all its time in clock_nanosleep: the call interrupts it, and the
    // restored registers must restart it (it still sleeps its whole time, then exits 0).
    let z = zlib();
    let start = Instant::now();
    let mut child = Command::new("sleep").arg("2").spawn().expect("sleep");
    std::thread::sleep(Duration::from_millis(300));
    let o = attach(child.id(), Some(&z));
    assert!(o.status.success(), "attach failed: {}", o.stderr);
    let st = child.wait().expect("wait");
    assert!(st.success(), "sleep ended {st}");
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(1900), "sleep 2 ended after {took:?}: its sleep was cut short");
}

#[test]
fn refuses_a_static_executable() {
    let dir = TempDir::new().unwrap();
    let exe = dir.path().join("attach_target_static");
    let src = workspace_root().join("itest/programs/c/attach_target.c");
    let st = Command::new("cc").args(["-O1", "-static", "-pthread", "-o"]).arg(&exe).arg(&src).status();
    match st {
        Ok(s) if s.success() => {}
        _ => need("a static C library (libc.a)", "apt-get install libc6-dev"),
    }
    let t = Target::start(&exe, 1);
    let o = attach(t.pid(), None);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("static executable with no loader"), "{}", o.stderr);
    assert_eq!(o.stderr.trim_end().lines().count(), 1, "{}", o.stderr);
    t.finish();
}

#[test]
fn refuses_a_process_another_tracer_holds() {
    let t = Target::start(&cprog("attach_target"), 1);
    // This test process seizes it (no stop: PTRACE_SEIZE alone leaves it running).
    let rc = unsafe { libc::ptrace(libc::PTRACE_SEIZE, t.pid() as i32, 0usize, 0usize) };
    assert_eq!(rc, 0, "PTRACE_SEIZE: {}", std::io::Error::last_os_error());
    let o = attach(t.pid(), None);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    let me = std::process::id();
    assert!(o.stderr.contains(&format!("already traced by process {me}")), "{}", o.stderr);
    assert_eq!(o.stderr.trim_end().lines().count(), 1, "{}", o.stderr);
    unsafe { libc::ptrace(libc::PTRACE_DETACH, t.pid() as i32, 0usize, 0usize) };
}

#[test]
fn refuses_a_process_that_is_not_there() {
    // A pid beyond pid_max is never a process.
    let o = attach(4_194_305, None);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("no such process"), "{}", o.stderr);
}
