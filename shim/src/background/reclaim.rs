//! Dead processes' in-flight files, recovered into their logs by a process that starts
//! (recorder::reclaim does the work; this is when and where). A crash loop would otherwise
//! leave every dead process's buffers in tmpfs (RAM) until someone reads its log.
//!
//! Off the program's path: the recorder thread starts a thread of its own for it once the
//! log is open (a raw pthread, internal as the recorder is: its allocations and zstd's pass
//! straight to the backend, unrecorded), so that neither the program's threads nor the
//! recorder's draining ever wait for a recovery. Its first look is one `stat` of the
//! directory (tmpfs gives the number of files from it). When the directory is crowded (so
//! many files that even the smallest dead ones would take half of SHIM_INFLIGHT_MAX:
//! recorder::reclaim::crowded), it recovers the [`QUICK`] oldest dead files at once, found by
//! the start time their names carry: a crash loop of processes that die within a
//! millisecond or two thus removes files as fast as it makes them, and abort() lets the
//! recovery under way finish first ([`finish_before_abort`]). Then, at nice 10, it waits
//! until [`START_AFTER_NS`] after the process's start (a process that ends before does
//! nothing more) and handles the oldest dead files: at most [`BURST`] at once, then, while
//! the dead files together take more than SHIM_INFLIGHT_MAX, [`PER_SECOND`] a second up to
//! [`OVER_CAP`] for this start. A file whose log is gone or cannot be written is removed,
//! with one line: a record in the watch log when the process has one (capture windows), on
//! stderr otherwise. Fork children do not do it (their parent did), nor does a process with
//! SHIM_INFLIGHT_MAX=off (or SHIM_TRACE=0: no recorder thread).
//! Nothing it meets stops the program: every failure is a file left or removed, said.
use crate::shared::{self, say, G};
use crate::thread::tls;
use crate::thread::QUIESCE;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use recorder::reclaim::{self, Outcome};

/// How long after the process's start the thread begins (10 ms).
pub const START_AFTER_NS: u64 = 10_000_000;
/// Files handled at once, at start.
pub const BURST: usize = 8;
/// Files a second after the burst, while over the cap.
pub const PER_SECOND: u64 = 8;
/// Files at most per start, however far over the cap.
pub const OVER_CAP: usize = 64;
/// Files recovered at once, before the wait, when the directory is crowded.
pub const QUICK: usize = 4;
/// How long abort() lets a recovery under way finish, at most (100 ms).
pub const ABORT_WAIT_NS: u64 = 100_000_000;

/// Set while the thread recovers (the crowded start's whole burst, or one file later on).
static WORKING: AtomicBool = AtomicBool::new(false);
/// Set by abort(): the thread begins no other file.
static STOP: AtomicBool = AtomicBool::new(false);

/// Starts the reclaiming thread (from the recorder thread, once the log is open).
pub fn start() {
    let g = G.get();
    if g.forked || g.inflight_max.is_none() {
        return;
    }
    // Nothing is lost when it cannot start: the next process will do it.
    let _ = shared::spawn_detached(entry);
}

extern "C" fn entry(_: *mut libc::c_void) -> *mut libc::c_void {
    tls::get().busy = 1;
    unsafe {
        // The program's signals go to the program's threads, never to this one.
        let mut all: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, core::ptr::null_mut());
    }
    let g = G.get();
    let Some(cap) = g.inflight_max else { return core::ptr::null_mut() };
    // Under the fork lock from here on whenever it allocates (thread::QUIESCE): a recovery,
    // even a path, allocates through the backend, whose locks a fork child would inherit held.
    if !take_quiesce(50) {
        return core::ptr::null_mut();
    }
    let dir = recorder::inflight::user_dir(&g.inflight_base);
    // A crash loop of processes that die within a few ms: recover some now, at the
    // program's own priority (its threads are not made to wait: this is a thread of its own).
    let (mut held, mut done) = (true, 0);
    if reclaim::entries(&dir).is_some_and(|n| reclaim::crowded(n, cap)) {
        WORKING.store(true, SeqCst);
        (held, done) = quick(&dir);
        WORKING.store(false, SeqCst);
    }
    if !held {
        // The exit began: not freed without the lock.
        core::mem::forget(dir);
        return core::ptr::null_mut();
    }
    drop(dir);
    QUIESCE.unlock();
    // This thread only (a thread id is a PRIO_PROCESS target on Linux).
    unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10) };
    // Not during the program's first moments: a short-lived command (a shell's, a build's)
    // ends before and pays nothing, and a longer one's start-up is not competed with. The
    // fork lock is not even asked for meanwhile (asking spins while the recorder works).
    let age = recorder::clock::mono_ns().saturating_sub(G.get().p0.mono_ns);
    if !sleep(START_AFTER_NS.saturating_sub(age)) || !take_quiesce(1000) {
        return core::ptr::null_mut();
    }
    // Not forked while this thread works (thread::QUIESCE): a recovery allocates through the
    // backend, whose locks a child would inherit held. Released while it pauses.
    if run(cap, done) {
        QUIESCE.unlock();
    }
    core::ptr::null_mut()
}

/// The crowded start's recoveries: the [`QUICK`] oldest dead files. Called with the fork
/// lock held, which it lets go between files (a fork waits for one file at most). Returns
/// whether it ends holding it (false: the exit began while it was let go), and the files
/// it handled.
fn quick(dir: &str) -> (bool, usize) {
    let mut done = 0;
    for path in reclaim::oldest_dead(dir, QUICK) {
        if done > 0 {
            QUIESCE.unlock();
            if !take_quiesce(50) {
                return (false, done);
            }
        }
        if STOP.load(SeqCst) || shared::SHUTDOWN.load(Acquire) {
            break;
        }
        handle(&path);
        done += 1;
    }
    (true, done)
}

/// For abort(): the recovery under way finishes first ([`ABORT_WAIT_NS`] at most) and no
/// other begins, so that a crash loop's processes, dying young, take files away as they
/// leave theirs.
pub fn finish_before_abort() {
    STOP.store(true, SeqCst);
    let until = recorder::clock::mono_ns() + ABORT_WAIT_NS;
    while WORKING.load(SeqCst) && recorder::clock::mono_ns() < until {
        unsafe { libc::usleep(100) };
    }
}

/// Recovers (or removes) one dead file, and says so when it is removed.
fn handle(path: &str) {
    let g = G.get();
    let o = reclaim::reclaim(path);
    if let Outcome::Removed { why, pid, .. } = o {
        // One line: a record in the watch log when there is one, else on stderr.
        if g.windows.is_none() || !note_removed(why, pid) {
            say(&reclaim::said("shim", path, &o));
        }
    }
}

/// The recoveries, `done` of this start's handled already; true when it ends holding the
/// fork lock (false: a pause saw the exit).
fn run(cap: u64, done: usize) -> bool {
    let dir = recorder::inflight::user_dir(&G.get().inflight_base);
    let burst = BURST.saturating_sub(done);
    let Ok((todo, _)) = reclaim::plan(&dir, cap, burst, OVER_CAP.saturating_sub(done)) else { return true };
    for (i, e) in todo.iter().enumerate() {
        if i >= burst && !pause(1_000_000_000 / PER_SECOND) {
            return false;
        }
        WORKING.store(true, SeqCst);
        if shared::SHUTDOWN.load(Acquire) || STOP.load(SeqCst) {
            WORKING.store(false, SeqCst);
            return true;
        }
        handle(&e.path);
        WORKING.store(false, SeqCst);
    }
    true
}

/// Removals for the watch log, `why << 32 | pid` (0: free), until the recorder writes them.
static REMOVED: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

/// Hands a removal to the recorder thread; false when all slots are taken.
fn note_removed(why: u64, pid: u32) -> bool {
    let v = why << 32 | pid as u64;
    REMOVED.iter().any(|s| s.compare_exchange(0, v, Release, Relaxed).is_ok())
}

/// For the recorder thread: each removal handed over since its last look, as (why, pid):
/// it writes them in the watch log (recorder::window_event::INFLIGHT_*).
pub fn take_removed(mut f: impl FnMut(u64, u32)) {
    for s in &REMOVED {
        let v = s.swap(0, Acquire);
        if v != 0 {
            f(v >> 32, v as u32);
        }
    }
}

/// Sleeps `ns` (without the fork lock), false when the process began its exit meanwhile.
fn sleep(ns: u64) -> bool {
    let until = recorder::clock::mono_ns() + ns;
    loop {
        let now = recorder::clock::mono_ns();
        if now >= until {
            break;
        }
        if shared::SHUTDOWN.load(Acquire) {
            return false;
        }
        unsafe { libc::usleep(((until - now) / 1000).min(10_000) as libc::c_uint) };
    }
    !shared::SHUTDOWN.load(Acquire)
}

/// Takes the fork lock, sleeping `us` µs between tries (the recorder holds it while it
/// works, and a background chore has no cause to spin for it); false when the process began
/// its exit meanwhile.
fn take_quiesce(us: u32) -> bool {
    while !QUIESCE.try_relock() {
        if shared::SHUTDOWN.load(Acquire) {
            return false;
        }
        unsafe { libc::usleep(us) };
    }
    true
}

/// Sleeps `ns` with the fork lock released (a fork may happen meanwhile: this thread
/// allocates nothing while it sleeps); false, and the lock not held, when the process began
/// its exit meanwhile.
fn pause(ns: u64) -> bool {
    QUIESCE.unlock();
    sleep(ns) && take_quiesce(1000)
}
