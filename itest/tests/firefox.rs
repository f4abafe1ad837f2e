//! Debian's Firefox ESR (`firefox-esr`) under the shim (issue #41). Its executable is stripped
//! and brings mozjemalloc, exporting the malloc family unprefixed with its own API
//! (`moz_arena_*`, `jemalloc_stats_*`, `malloc_good_size`, ...) for libxul; it starts content
//! processes and a crash helper. It takes a headless screenshot of a local page whose script
//! allocates (strings, arrays, DOM nodes): bare, under `shimlog record` in the default mode
//! (mozjemalloc kept, its calls recorded), under `shimlog run` (SHIM_TRACE=0) and recorded
//! with each backend serving it. Each run exits 0 and writes the bare run's screenshot, byte
//! for byte; every process of the tree has a log that `shimlog stats` reads; the main
//! process's log holds mozjemalloc's calls (over 100,000 on this page) and its header lists
//! mozjemalloc as recorded or switched; no log byte (the log magic, or a frame header whose
//! checksum holds) is in any file the browser wrote (its profile, home and screenshot).
use itest::*;
use recorder::format::{FrameHeader, FRAME_HEADER_LEN, MAGIC};
use std::path::{Path, PathBuf};

/// firefox-esr on PATH; the test fails naming the package when it is not.
fn firefox() -> PathBuf {
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let p = dir.join("firefox-esr");
        if p.is_file() {
            return p;
        }
    }
    need("firefox-esr", "apt-get install firefox-esr")
}

/// The page: its script makes 20,000 objects with strings and arrays (keeping one in a
/// hundred), then 400 DOM rows, removes half of them, and sets the title: the content process
/// allocates a few hundred thousand blocks, and what is drawn does not depend on timing.
const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>alloc</title>
<style>body{font-family:sans-serif;background:#fff;color:#123}</style></head>
<body><h1>allocating</h1><div id="out"></div>
<script>
let keep = [];
for (let i = 0; i < 20000; i++) {
  const o = { i, s: "item-" + i + "-" + "x".repeat(i % 64), a: new Array(i % 32).fill(i) };
  if (i % 100 === 0) keep.push(o);
}
const out = document.getElementById("out");
for (let i = 0; i < 400; i++) {
  const d = document.createElement("div");
  d.textContent = "row " + i + " " + keep[i % keep.length].s.length;
  out.appendChild(d);
}
for (let i = 0; i < 400; i += 2) out.removeChild(out.children[i / 2]);
document.title = "done " + keep.length;
</script></body></html>
"#;

/// How a run is made.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Bare,
    /// `shimlog record`, SHIM_BACKEND unset (None) or the backend named.
    Record(Option<&'static str>),
    /// `shimlog run`: SHIM_TRACE=0, SHIM_BACKEND unset.
    Untraced,
}

/// One run: what it printed, and its directory (`home/`, `profile/`, `shot.png`, `logs/`).
struct Run {
    out: Output,
    dir: TempDir,
    what: String,
}

impl Run {
    fn shot(&self) -> PathBuf {
        self.dir.path().join("shot.png")
    }
    fn logs(&self) -> Vec<PathBuf> {
        let d = self.dir.path().join("logs");
        if !d.is_dir() {
            return Vec::new();
        }
        list_files(&d).into_iter().filter(|p| p.to_string_lossy().contains(".shimlog")).collect()
    }
}

fn browse(mode: Mode) -> Run {
    let dir = tempfile::Builder::new().prefix("itest-firefox-").tempdir().expect("tempdir");
    let page = dir.path().join("page.html");
    std::fs::write(&page, PAGE).expect("write the page");
    for d in ["home", "profile"] {
        std::fs::create_dir(dir.path().join(d)).expect("mkdir");
    }
    let ff = firefox();
    let shot = dir.path().join("shot.png");
    let browser_args: Vec<String> = vec![
        ff.to_string_lossy().into_owned(),
        "--headless".into(),
        "--no-remote".into(),
        "--profile".into(),
        dir.path().join("profile").to_string_lossy().into_owned(),
        "--screenshot".into(),
        shot.to_string_lossy().into_owned(),
        format!("file://{}", page.display()),
    ];
    let mut c = match mode {
        Mode::Bare => {
            let mut c = command(&browser_args[0]);
            c.args(&browser_args[1..]);
            c
        }
        Mode::Record(backend) => {
            let mut c = command(shimlog_bin());
            c.args(["record", "-q", "-o"]).arg(dir.path().join("logs"));
            if let Some(b) = backend {
                c.args(["--backend", b]);
            }
            c.arg("--").args(&browser_args);
            c
        }
        Mode::Untraced => {
            let mut c = command(shimlog_bin());
            c.args(["run", "--"]).args(&browser_args);
            c
        }
    };
    // Its own home and profile, headless; the in-flight files in a directory of this run's
    // own, reclaimed as by default (no other test's dead processes are there).
    let inflight = private_inflight_base();
    c.env("HOME", dir.path().join("home"))
        .env("MOZ_HEADLESS", "1")
        // No crash helper: a daemon of its own that can outlive the browser holding the
        // run's output pipes (once, switched under load, it stayed 5 minutes: the test waits
        // for those pipes' end).
        .env("MOZ_CRASHREPORTER_DISABLE", "1")
        .env("SHIM_INFLIGHT_DIR", inflight.path())
        .env_remove("SHIM_INFLIGHT_MAX")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY");
    let out = run(c);
    drop(inflight);
    Run { out, dir, what: format!("firefox-esr --screenshot, {mode:?}") }
}

/// The width and height of a PNG (None when `b` is no PNG).
fn png_size(b: &[u8]) -> Option<(u32, u32)> {
    if b.len() < 24 || &b[..8] != b"\x89PNG\r\n\x1a\n" || &b[12..16] != b"IHDR" {
        return None;
    }
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    Some((be(16), be(20)))
}

/// Where in `b` a log's bytes are: its magic, or a frame header whose checksum holds.
fn log_bytes_at(b: &[u8]) -> Option<usize> {
    let frame = FRAME_MAGIC_BYTES;
    (0..b.len().saturating_sub(3)).find(|&i| {
        (b[i] == MAGIC[0] && b[i..].starts_with(MAGIC))
            || (b[i] == frame[0]
                && b[i..].starts_with(&frame)
                && b.len() >= i + FRAME_HEADER_LEN
                && FrameHeader::decode(&b[i..i + FRAME_HEADER_LEN]).is_some())
    })
}

const FRAME_MAGIC_BYTES: [u8; 4] = recorder::format::FRAME_MAGIC.to_le_bytes();

/// Every file under `dir`, but not under `skip`.
fn files_under(dir: &Path, skip: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p == skip {
            continue;
        }
        match e.file_type() {
            Ok(t) if t.is_dir() => files_under(&p, skip, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

/// `shimlog stats --json LOG`, or why it could not read it.
fn stats(log: &Path) -> Result<serde_json::Value, String> {
    let mut c = command(shimlog_bin());
    c.arg("stats").arg(log).arg("--json");
    let o = run(c);
    if !o.status.success() {
        return Err(format!("shimlog stats {} exited with {}: {}", log.display(), o.status, o.stderr));
    }
    serde_json::from_slice(&o.stdout).map_err(|e| format!("shimlog stats {}: not JSON ({e})", log.display()))
}

/// The checks every run shares: exit 0, the bare run's screenshot, no log byte in the
/// browser's files.
fn check_run(c: &mut Checks, r: &Run, bare: &[u8]) {
    let what = &r.what;
    c.check(r.out.status.success(), || {
        format!("{what}: exited with {}\nstderr:\n{}", r.out.status, r.out.stderr)
    });
    match std::fs::read(r.shot()) {
        Err(e) => c.check(false, || format!("{what}: no screenshot ({e})\nstderr:\n{}", r.out.stderr)),
        Ok(got) => c.check(got == bare, || {
            format!(
                "{what}: the screenshot differs from the bare run's ({} bytes, {:?}, against {} bytes, {:?})",
                got.len(),
                png_size(&got),
                bare.len(),
                png_size(bare)
            )
        }),
    }
    let mut files = Vec::new();
    files_under(r.dir.path(), &r.dir.path().join("logs"), &mut files);
    for f in files {
        let Ok(b) = std::fs::read(&f) else { continue };
        if let Some(at) = log_bytes_at(&b) {
            c.check(false, || format!("{what}: {} holds a log's bytes at offset {at}", f.display()));
        }
    }
}

/// The checks of a recorded run: every log reads, the tree hangs together, and the main
/// process's log holds mozjemalloc's calls, its header naming mozjemalloc in `mode`.
fn check_logs(c: &mut Checks, r: &Run, mode: &str) {
    let what = &r.what;
    let logs = r.logs();
    let mut procs: Vec<(u32, u32, String, u64)> = Vec::new();
    for log in &logs {
        match stats(log) {
            Err(e) => c.check(false, || format!("{what}: {e}")),
            Ok(s) => {
                let p = &s["process"];
                procs.push((
                    p["pid"].as_u64().unwrap_or(0) as u32,
                    p["ppid"].as_u64().unwrap_or(0) as u32,
                    p["exe"].as_str().unwrap_or("").to_string(),
                    s["events"].as_u64().unwrap_or(0),
                ));
            }
        }
    }
    let shown = || format!("{procs:?}\nstderr:\n{}", r.out.stderr);
    // The main process: the firefox-esr whose parent is shimlog (not among the logs). The
    // crash helper daemonizes: its second child, whose parent exited before it started, has
    // init (1) for a parent.
    let pids: Vec<u32> = procs.iter().map(|p| p.0).collect();
    let roots: Vec<&(u32, u32, String, u64)> =
        procs.iter().filter(|p| !pids.contains(&p.1) && p.1 != 1).collect();
    c.check(roots.len() == 1 && roots[0].1 == r.out.pid, || {
        format!(
            "{what}: want one root process, shimlog's child, every other log's parent among the logs: {}",
            shown()
        )
    });
    let contents = procs.iter().filter(|p| p.2.ends_with("firefox-esr") && p.1 != r.out.pid).count();
    c.check(contents >= 1, || format!("{what}: no content process left a log: {}", shown()));
    if let Some(main) = roots.first() {
        c.check(main.3 > 100_000, || {
            format!("{what}: the main process's log holds {} events, want over 100,000: {}", main.3, shown())
        });
        if let Some(log) = logs.iter().find(|l| l.to_string_lossy().contains(&format!(".{}.shimlog", main.0)))
        {
            let a = analyze(log, |_| false);
            let moz = a.header.own_allocators.iter().find(|o| o.family == "mozjemalloc");
            c.check(moz.is_some_and(|o| o.mode == mode), || {
                format!(
                    "{what}: the main log's header does not list mozjemalloc {mode}: {:?}",
                    a.header.own_allocators
                )
            });
        }
    }
}

fn bare() -> Vec<u8> {
    let r = browse(Mode::Bare);
    r.out.assert_success("firefox-esr --screenshot without the shim");
    let b = std::fs::read(r.shot()).unwrap_or_else(|e| panic!("the bare run wrote no screenshot ({e})"));
    assert!(png_size(&b).is_some(), "the bare run's screenshot is no PNG");
    b
}

/// Default mode: mozjemalloc kept and recorded; then SHIM_TRACE=0.
#[test]
fn screenshot_recorded_and_untraced() {
    let bare = bare();
    let mut c = Checks::new();
    let r = browse(Mode::Record(None));
    check_run(&mut c, &r, &bare);
    check_logs(&mut c, &r, "recorded");
    let r = browse(Mode::Untraced);
    check_run(&mut c, &r, &bare);
    c.finish("firefox-esr under the shim");
}

/// Switched to each backend, recorded.
#[test]
fn screenshot_switched() {
    let bare = bare();
    let mut c = Checks::new();
    for b in BACKENDS {
        let r = browse(Mode::Record(Some(b)));
        check_run(&mut c, &r, &bare);
        check_logs(&mut c, &r, "switched");
    }
    c.finish("firefox-esr switched under the shim");
}
