//! `shimlog record [OPTIONS] -- PROG [ARGS...]`: runs a program under libshim.so with its
//! logs in one new directory (`shimlog-PROG-YYYYMMDD-HHMMSS/`, or `-o DIR`), every process of
//! its tree there (`%e.%p.shimlog`: execs and forks alike), then prints the tree (summary.rs)
//! and the commands that read it. `shimlog run --backend NAME -- PROG [ARGS...]`: the same
//! program on another allocator, nothing recorded (SHIM_TRACE=0).
//!
//! libshim.so is looked for beside the shimlog executable, then in `../lib` (the installed
//! layout: `make install`, `make dist`), unless `--shim PATH` names it. The exit status is the
//! program's (a death by signal N is 128+N, as a shell says it); shimlog's own failures are
//! as a shell's: 127 for a program not found, 126 for one that cannot be executed, and 125
//! (as env(1) and timeout(1)) for the rest. A SHIM_* variable already in the environment is
//! passed on unless its flag is given (SHIM_LOG is always the directory's, SHIM_TRACE unset).
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

mod settings;
mod summary;

/// shimlog's own failure (not the program's).
const FAILED: i32 = 125;
const CANNOT_EXECUTE: i32 = 126;
const NOT_FOUND: i32 = 127;

/// The program to run, and where the shim is.
#[derive(clap::Args)]
pub struct Target {
    /// The libshim.so to preload (default: beside shimlog, or in ../lib).
    #[arg(long, value_name = "PATH")]
    shim: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(value_name = "PROG", required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

/// What `record` and `run` exit with, for their help and man pages.
const EXIT_STATUS: &str = "Exit status: the program's (128+N when signal N ended it, as a shell says it); \
                           127: PROG not found; 126: PROG cannot be executed; 125: shimlog itself failed.";

#[derive(clap::Args)]
#[command(
    override_usage = "shimlog record [OPTIONS] -- PROG [ARGS]...",
    after_help = record_help(),
)]
pub struct Args {
    /// The directory of the logs (default: a new shimlog-PROG-YYYYMMDD-HHMMSS in the current directory).
    /// It is created; one that exists must be empty.
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Print nothing of shimlog's own (only the program's output).
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    settings: settings::Settings,
    #[command(flatten)]
    target: Target,
}

#[derive(clap::Args)]
#[command(override_usage = "shimlog run [--backend NAME[:KEY=VALUE,...]] [--shim PATH] -- PROG [ARGS]...", after_help = EXIT_STATUS)]
pub struct RunArgs {
    #[arg(long, value_name = "NAME[:KEY=VALUE,...]", value_parser = settings::backend_value, help = format!(
        "The allocator that serves every call: own, {}, with its settings if any \
         (`jemalloc:dirty_decay_ms=0`; docs/settings.md)",
        shim_config::BACKENDS_LIST
    ))]
    backend: Option<String>,
    #[command(flatten)]
    target: Target,
}

fn record_help() -> String {
    format!(
        "{EXIT_STATUS}\n\nExamples:\n  shimlog record -- ./server --port 8080\n  \
         shimlog record -o run1 --stacks sample -- make -j2\n  shimlog stats run1/*.shimlog"
    )
}

pub fn record(a: Args) -> Result<i32, String> {
    own_failure(record_in(a))
}

pub fn run(a: RunArgs) -> Result<i32, String> {
    own_failure(run_in(a))
}

/// A failure of shimlog's own (not the program's) is one line and exit status [`FAILED`].
fn own_failure(r: Result<i32, String>) -> Result<i32, String> {
    Ok(r.unwrap_or_else(|e| {
        eprintln!("shimlog: {e}");
        FAILED
    }))
}

fn record_in(a: Args) -> Result<i32, String> {
    let Some((shim, prog)) = prepare(&a.target) else { return Ok(NOT_FOUND) };
    let shim = shim?;
    let name = display_name(&a.target.command[0]);
    let (dir, made) = match &a.output {
        Some(d) => given_dir(d)?,
        None => (new_dir(&name)?, true),
    };
    let abs = std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut cmd = command(&shim, &prog, &a.target.command);
    cmd.env("SHIM_LOG", abs.join("%e.%p.shimlog")).env_remove("SHIM_TRACE");
    for (var, v) in &a.settings.0 {
        cmd.env(var, v);
    }
    let code = match spawn_wait(cmd, &a.target.command[0]) {
        Ok(c) => c,
        Err(c) => {
            if made {
                let _ = std::fs::remove_dir(&dir);
            }
            return Ok(c);
        }
    };
    if !a.quiet {
        let shown = dir.display().to_string();
        let shown = if shown.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
            format!("'{}'", shown.replace('\'', "'\\''"))
        } else {
            shown
        };
        let head = summary::status_line(&name, code);
        let _ = summary::print(&abs, &shown, &head, &mut std::io::stderr().lock());
    }
    Ok(code)
}

fn run_in(a: RunArgs) -> Result<i32, String> {
    let Some((shim, prog)) = prepare(&a.target) else { return Ok(NOT_FOUND) };
    let mut cmd = command(&shim?, &prog, &a.target.command);
    cmd.env("SHIM_TRACE", "0");
    if let Some(b) = &a.backend {
        cmd.env("SHIM_BACKEND", b);
    }
    Ok(spawn_wait(cmd, &a.target.command[0]).unwrap_or_else(|c| c))
}

/// The program found on PATH (None, with the line said: not found), and the shim.
fn prepare(t: &Target) -> Option<(Result<PathBuf, String>, PathBuf)> {
    let prog = &t.command[0];
    let Some(found) = which(prog) else {
        eprintln!("shimlog: {}: command not found", prog.to_string_lossy());
        return None;
    };
    Some((find_shim(t.shim.as_deref()), found))
}

/// `libshim.so` named by --shim, else beside this executable, else in `../lib` of its directory.
pub(crate) fn find_shim(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return if p.is_file() {
            std::fs::canonicalize(p).map_err(|e| format!("--shim {}: {e}", p.display()))
        } else {
            Err(format!(
                "--shim {}: no such file (name libshim.so, as cargo build --release or make install put it)",
                p.display()
            ))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find shimlog itself: {e}"))?;
    let bin = exe.parent().unwrap_or(Path::new("/"));
    let tried = [bin.join("libshim.so"), bin.join("../lib/libshim.so")];
    tried
        .iter()
        .find(|p| p.is_file())
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .ok_or_else(|| {
            format!(
                "libshim.so is neither beside shimlog ({}) nor in {}; name it with --shim PATH",
                tried[0].display(),
                tried[1].display()
            )
        })
}

/// Where a shell would find `prog`: a path as it is, a bare name on PATH.
fn which(prog: &OsStr) -> Option<PathBuf> {
    let p = Path::new(prog);
    if prog.as_bytes().contains(&b'/') {
        return p.exists().then(|| p.to_path_buf());
    }
    if prog.is_empty() {
        return None;
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(p)).find(|c| {
        std::fs::metadata(c).is_ok_and(|m| {
            m.is_file() && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
        })
    })
}

/// The program under the shim (added before any LD_PRELOAD it had, an older libshim.so
/// taken out), with its name as typed in argv[0].
fn command(shim: &Path, prog: &Path, argv: &[OsString]) -> Command {
    let mut pre = shim.as_os_str().to_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD") {
        for p in
            old.to_string_lossy().split([' ', ':']).filter(|p| !p.is_empty() && !p.ends_with("libshim.so"))
        {
            pre.push(":");
            pre.push(p);
        }
    }
    let mut cmd = Command::new(prog);
    cmd.arg0(&argv[0]).args(&argv[1..]).env("LD_PRELOAD", pre);
    cmd
}

/// The program's name for the directory and the summary: its file name.
fn display_name(prog: &OsStr) -> String {
    let n = Path::new(prog).file_name().unwrap_or(prog).to_string_lossy().into_owned();
    n.chars().map(|c| if c.is_ascii_alphanumeric() || "._-+".contains(c) { c } else { '_' }).collect()
}

/// A new directory `shimlog-NAME-YYYYMMDD-HHMMSS` (then `-2`, `-3`, ... if taken).
fn new_dir(name: &str) -> Result<PathBuf, String> {
    let t = unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&now, &mut tm);
        format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec
        )
    };
    let base = format!("shimlog-{name}-{t}");
    for n in 1.. {
        let d = PathBuf::from(if n == 1 { base.clone() } else { format!("{base}-{n}") });
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => continue,
            Err(e) => return Err(format!("cannot create the log directory {}: {e}", d.display())),
        }
    }
    unreachable!()
}

/// `-o DIR`: created (with its parents) if missing, else it must be an empty directory.
/// Also says whether it was made here (to be removed again when the program cannot start).
fn given_dir(d: &Path) -> Result<(PathBuf, bool), String> {
    match std::fs::read_dir(d).map(|mut rd| rd.next().is_none()) {
        Ok(true) => Ok((d.to_path_buf(), false)),
        Ok(_) => Err(format!("-o {}: the directory is not empty; name a new or empty one", d.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(d).map_err(|e| format!("-o {}: cannot create it: {e}", d.display()))?;
            Ok((d.to_path_buf(), true))
        }
        Err(e) => Err(format!("-o {}: {e} (a directory is expected)", d.display())),
    }
}

/// The child, for the handler that passes SIGTERM and SIGHUP on.
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn pass_on(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        unsafe { libc::kill(pid, sig) };
    }
}

/// Starts the program and waits for it, as a shell does: Ctrl-C and Ctrl-\ reach it (the
/// terminal's process group) and not shimlog, which then says how it ended; SIGTERM and
/// SIGHUP sent to shimlog are passed on. Ok(exit status, 128+N for signal N), or Err(126 /
/// 127) when it could not be started (the line said).
fn spawn_wait(mut cmd: Command, prog: &OsStr) -> Result<i32, i32> {
    let mut child = cmd.spawn().map_err(|e| {
        eprintln!("shimlog: {}: {e}", prog.to_string_lossy());
        if e.kind() == std::io::ErrorKind::NotFound {
            NOT_FOUND
        } else {
            CANNOT_EXECUTE
        }
    })?;
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    let handler = pass_on as extern "C" fn(libc::c_int) as libc::sighandler_t;
    let old: Vec<(i32, libc::sighandler_t)> = [
        (libc::SIGINT, libc::SIG_IGN),
        (libc::SIGQUIT, libc::SIG_IGN),
        (libc::SIGTERM, handler),
        (libc::SIGHUP, handler),
    ]
    .into_iter()
    .map(|(s, h)| (s, unsafe { libc::signal(s, h) }))
    .collect();
    let status = loop {
        match child.wait() {
            Ok(s) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("shimlog: waiting for {}: {e}", prog.to_string_lossy());
                break std::process::ExitStatus::from_raw(FAILED << 8);
            }
        }
    };
    for (s, h) in old {
        unsafe { libc::signal(s, h) };
    }
    Ok(status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(FAILED))
}
