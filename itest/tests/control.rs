//! The control socket (SHIM_CONTROL=1) and `shimlog ctl PID start [DURATION] | stop |
//! status` on a running program (itest/programs/c/windows.c); another user cannot drive it.
use itest::*;
use recorder::{window_event, LogReader, Op};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn ctl(pid: u32, args: &[&str]) -> Output {
    let mut c = command(shimlog_bin());
    c.arg("ctl").arg(pid.to_string()).args(args);
    run(c)
}

/// Starts windows.c for `secs` under the shim with the control socket, and waits until
/// the socket answers.
fn start(dir: &std::path::Path, secs: &str) -> Child {
    let mut c = command(cprog("windows"));
    c.arg(secs)
        .env("LD_PRELOAD", shim_lib())
        .env("SHIM_CONTROL", "1")
        .env("SHIM_START", "1h")
        .env("SHIM_LOG", dir.join("c.%n.shimlog"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("start windows.c");
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if ctl(child.id(), &["status"]).status.success() {
            return child;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = child.id();
    let _ = child.kill();
    let _ = child.wait();
    panic!("the control socket of {pid} never answered");
}

#[test]
fn start_stop_status_on_a_running_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = start(dir.path(), "3");
    let pid = child.id();
    let s = ctl(pid, &["status"]);
    assert!(s.stdout_str().starts_with("watching"), "status: {}", s.stdout_str());
    let s = ctl(pid, &["start", "10s"]);
    s.assert_success("ctl start 10s");
    assert!(s.stdout_str().starts_with("recording window 1 for 10.0s"), "start: {}", s.stdout_str());
    let s = ctl(pid, &["status"]);
    assert!(s.stdout_str().starts_with("recording window 1"), "status: {}", s.stdout_str());
    let again = ctl(pid, &["start"]);
    assert!(!again.status.success(), "a second start succeeded: {}", again.stdout_str());
    std::thread::sleep(Duration::from_millis(300));
    let s = ctl(pid, &["stop"]);
    s.assert_success("ctl stop");
    assert!(s.stdout_str().starts_with("stopped window 1"), "stop: {}", s.stdout_str());
    let s = ctl(pid, &["stop"]);
    assert!(!s.status.success(), "stop while watching succeeded");
    assert!(s.stderr.contains("not recording"), "stop while watching: {}", s.stderr);
    let bad = ctl(pid, &["start", "soon"]);
    assert!(!bad.status.success() && bad.stderr.lines().count() == 1, "bad duration: {}", bad.stderr);
    let st = child.wait().expect("wait");
    assert!(st.success(), "windows.c under the shim: {st}");

    // Window 1's log holds about 300 ms of calls; the watch log says it was on demand.
    let a = analyze(&dir.path().join("c.1.shimlog"), |_| false);
    assert!(a.issues.is_empty() && a.clean_end, "window 1: {:?}", a.issues);
    assert!(a.count("malloc") >= 1000, "window 1 has {} mallocs", a.count("malloc"));
    let r = LogReader::open(dir.path().join("c.0.shimlog").to_str().unwrap()).expect("watch log");
    let marks: Vec<(u64, u64)> =
        r.events().filter(|e| e.op == Op::Window).map(|e| (e.size, e.value())).collect();
    assert_eq!(marks, [(1, window_event::START_DEMAND), (1, window_event::END_DEMAND)]);
    assert!(!dir.path().join("c.2.shimlog").exists());
}

#[test]
fn another_user_cannot_drive_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = start(dir.path(), "1.5");
    let pid = child.id();
    if unsafe { libc::geteuid() } != 0 {
        itest::skip("root", "not root: cannot run ctl as another user here; checked the socket's modes only");
    } else {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(shimlog_bin())
            .args(["ctl", &pid.to_string(), "start"])
            .output();
        match out {
            Ok(o) => {
                assert!(
                    !o.status.success(),
                    "nobody drove the process: {}",
                    String::from_utf8_lossy(&o.stdout)
                );
            }
            Err(e) => itest::need(&format!("setpriv ({e})"), "apt-get install util-linux"),
        }
        let s = ctl(pid, &["status"]);
        assert!(s.stdout_str().starts_with("watching"), "status after nobody's try: {}", s.stdout_str());
    }
    // The socket and its directory are the user's own.
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let base = std::env::var("TMPDIR").ok().filter(|t| t.starts_with('/')).unwrap_or_else(|| "/tmp".into());
    let d = format!("{}/shim-{}", base.trim_end_matches('/'), unsafe { libc::geteuid() });
    let m = std::fs::metadata(&d).expect("socket directory");
    assert_eq!(m.permissions().mode() & 0o777, 0o700, "{d}");
    let sm = std::fs::metadata(format!("{d}/ctl.{pid}")).expect("socket");
    assert_eq!(sm.mode() & 0o777, 0o600);
    assert_eq!(sm.uid(), unsafe { libc::geteuid() });
    assert!(child.wait().expect("wait").success());
    assert!(!std::path::Path::new(&format!("{d}/ctl.{pid}")).exists(), "the socket outlived the process");
}

/// SHIM_SIGNAL=USR2: one signal opens a window, the next closes it; the program is
/// unaffected.
#[test]
fn a_signal_toggles_a_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = command(cprog("windows"));
    c.arg("1.5")
        .env("LD_PRELOAD", shim_lib())
        .env("SHIM_SIGNAL", "USR2")
        .env("SHIM_START", "1h")
        .env("SHIM_LOG", dir.path().join("s.%n.shimlog"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().expect("start windows.c");
    let pid = child.id() as i32;
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(pid, libc::SIGUSR2) };
    std::thread::sleep(Duration::from_millis(400));
    unsafe { libc::kill(pid, libc::SIGUSR2) };
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "windows.c: {}", out.status);
    assert!(out.stderr.is_empty(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the program's JSON");
    assert_eq!(v["batch"], 100);
    let r = LogReader::open(dir.path().join("s.0.shimlog").to_str().unwrap()).expect("watch log");
    let marks: Vec<(u64, u64)> =
        r.events().filter(|e| e.op == Op::Window).map(|e| (e.size, e.value())).collect();
    assert_eq!(marks, [(1, window_event::START_SIGNAL), (1, window_event::END_SIGNAL)]);
    let a = analyze(&dir.path().join("s.1.shimlog"), |_| false);
    assert!(a.clean_end && a.count("malloc") > 1000, "window 1: {} mallocs", a.count("malloc"));
}
