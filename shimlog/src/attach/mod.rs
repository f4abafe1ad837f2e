//! `shimlog attach PID`: loads the shim into a running process with ptrace (no debugger):
//! every thread is stopped, none may be inside the C library's allocator or the loader (else
//! they run on for a moment and are stopped again), the loader's `dlopen` is called in one
//! of them, and they all go on. The pause is measured and printed.
//!
//! Where it cannot attach, one line says why and the exit status is 2.
mod ptrace;
mod target;

use nix::errno::Errno;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// The process.
    pub pid: u32,
    /// The library to load (default: the shim beside shimlog, or in ../lib).
    #[arg(long, value_name = "PATH")]
    pub library: Option<PathBuf>,
}

/// Exit status of a refusal.
const REFUSED: i32 = 2;

pub fn run(a: Args) -> Result<i32, String> {
    let lib = match &a.library {
        Some(p) => std::fs::canonicalize(p).map_err(|e| format!("attach: --library {}: {e}", p.display()))?,
        None => crate::record::find_shim(None)?,
    };
    match attach(a.pid, &lib.to_string_lossy()) {
        Ok(done) => {
            println!(
                "attach: loaded {} into process {}: its {} thread(s) paused {:.2} ms{}",
                lib.display(),
                a.pid,
                done.threads,
                done.pause.as_secs_f64() * 1e3,
                if done.tries > 1 {
                    format!(" (stopped {} times: a thread was inside the allocator)", done.tries)
                } else {
                    String::new()
                }
            );
            Ok(0)
        }
        Err(Fail::Refused(why)) => {
            eprintln!("shimlog attach: cannot attach to process {}: {why}", a.pid);
            Ok(REFUSED)
        }
        Err(Fail::Error(e)) => Err(format!("attach: process {}: {e}", a.pid)),
    }
}

pub struct Done {
    pub pause: Duration,
    pub threads: usize,
    pub tries: usize,
}

pub enum Fail {
    /// It cannot attach here, for a reason the user can act on.
    Refused(String),
    Error(String),
}

/// Stops at most this often before giving up on a moment when no thread is in the allocator.
const TRIES: usize = 200;

/// Loads `lib` into `pid`.
pub fn attach(pid: u32, lib: &str) -> Result<Done, Fail> {
    use Fail::*;
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        return Err(Refused("no such process".into()));
    }
    if let Some(why) = target::arch_mismatch(pid) {
        return Err(Refused(why));
    }
    if let Some(tracer) = tracer(pid) {
        return Err(Refused(format!(
            "it is already traced by process {tracer} ({}): a process has one tracer at a time",
            comm(tracer)
        )));
    }
    let maps = target::maps(pid).map_err(Refused)?;
    let loader = target::loaded(&maps, "ld-linux").or_else(|| target::loaded(&maps, "ld-"));
    let libc = target::libc(pid, &maps).map_err(Refused)?;
    let (Some(libc), Some((ld_path, _))) = (libc, loader) else {
        return Err(Refused(
            "it is a static executable with no loader (no ld.so, no libc.so in its memory): nothing can load a library into it"
                .into(),
        ));
    };
    let lib = reachable(pid, lib).map_err(Refused)?;
    if lib.len() > 380 {
        return Err(Error(format!("the library's path is too long ({} bytes)", lib.len())));
    }
    // Where a stopped thread must not be: the allocator (its locks) and the loader (its lock).
    let mut avoid = vec![libc.allocator];
    avoid.extend(target::text_of(&maps, &ld_path));
    let mut tries = 0;
    let mut st = loop {
        tries += 1;
        let st = match ptrace::stop_all(pid) {
            Ok(st) => st,
            Err(ptrace::StopError::Refused(e)) => return Err(Refused(ptrace_refusal(pid, e))),
            Err(ptrace::StopError::Other(e)) => return Err(Error(e)),
        };
        let busy = st.threads.iter().any(|h| avoid.iter().any(|&(a, b)| h.regs.rip >= a && h.regs.rip < b));
        if !busy {
            break st;
        }
        drop(st); // resumed
        if tries >= TRIES {
            return Err(Error(format!(
                "a thread was inside the allocator or the loader each of the {TRIES} times it was stopped"
            )));
        }
        std::thread::sleep(Duration::from_micros(500 + 100 * tries as u64));
    };
    let since: Instant = st.since;
    let threads = st.threads.len();
    let tid = st.caller(pid);
    let rsp = st.threads.iter().find(|h| h.tid == tid).map(|h| h.regs.rsp).unwrap_or(0);
    let mut path = lib.as_bytes().to_vec();
    path.push(0);
    let path_at = (rsp - 512 - path.len() as u64) & !0xf;
    st.write(tid, path_at, &path).map_err(Error)?;
    let alone = Duration::from_secs(2);
    let limit = Duration::from_secs(30);
    let handle = st
        .call(tid, libc.dlopen, &[path_at, (libc::RTLD_NOW | libc::RTLD_GLOBAL) as u64], alone, limit)
        .map_err(Error)?;
    if handle == 0 {
        let msg = st.call(tid, libc.dlerror, &[], alone, limit).map_err(Error)?;
        let text = if msg == 0 { String::from("(no message)") } else { st.read_str(tid, msg, 512) };
        st.resume();
        return Err(Error(format!("dlopen failed in the process: {text}")));
    }
    st.resume();
    Ok(Done { pause: since.elapsed(), threads, tries })
}

/// The process tracing `pid`, if one is.
fn tracer(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let t: u32 = s.lines().find_map(|l| l.strip_prefix("TracerPid:"))?.trim().parse().ok()?;
    if t == 0 {
        return None;
    }
    // TracerPid is the tracing thread: its process is its thread group.
    let tgid = std::fs::read_to_string(format!("/proc/{t}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Tgid:"))?.trim().parse().ok());
    Some(tgid.unwrap_or(t))
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Why PTRACE_SEIZE was refused, in words the user can act on.
fn ptrace_refusal(pid: u32, e: Errno) -> String {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    match (e, scope) {
        (Errno::EPERM, Some(1)) => "ptrace is restricted (kernel.yama.ptrace_scope = 1: a process may trace its own descendants only): run shimlog attach as root or with CAP_SYS_PTRACE, or set kernel.yama.ptrace_scope to 0".into(),
        (Errno::EPERM, Some(2)) => "ptrace is restricted to administrators (kernel.yama.ptrace_scope = 2): run shimlog attach with CAP_SYS_PTRACE".into(),
        (Errno::EPERM, Some(3)) => "ptrace is disabled (kernel.yama.ptrace_scope = 3, until the next reboot)".into(),
        (Errno::EPERM, _) => format!(
            "ptrace is not permitted (process {pid} belongs to another user, or is not dumpable, or a seccomp policy forbids ptrace): CAP_SYS_PTRACE is needed"
        ),
        (e, _) => format!("ptrace refused: {e}"),
    }
}

/// The library's path as the process sees it: the same path when it shares our mount
/// namespace, else a copy made through /proc/PID/root.
fn reachable(pid: u32, lib: &str) -> Result<String, String> {
    let ns = |p: &str| std::fs::read_link(p).ok();
    let (ours, theirs) = (ns("/proc/self/ns/mnt"), ns(&format!("/proc/{pid}/ns/mnt")));
    if ours == theirs {
        return Ok(lib.to_string());
    }
    let name = format!("/tmp/libshim-attach.{}.so", std::process::id());
    let dest = format!("/proc/{pid}/root{name}");
    std::fs::copy(lib, &dest).map(|_| name).map_err(|e| {
        format!("it runs in another mount namespace and the library cannot be copied into it ({dest}: {e})")
    })
}
