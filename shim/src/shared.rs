//! What the recording threads, the recorder and the lifecycle share: the settings and
//! objects of the process's log (`G`), the counters and flags the recorder thread and the
//! exit path exchange, the SHIM_SIGNAL handler, and the system helpers they use (one line on
//! stderr, membarrier, a raw thread). Below the threads and the recorder: imports only the
//! settings' types (config.rs) and the recorder's wake-up (wake.rs).
use crate::config::{OnFull, Pack, Timing, Windows};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use recorder::clock;
use recorder::transport::Pool;
use shim_backend::Backend;

/// Settings and shared objects of a recording process (replaced in a fork child).
pub struct Globals {
    pub pool: Pool,
    pub timing_period: u32,
    pub timing: Timing,
    pub on_full: OnFull,
    pub backend: Backend,
    pub zstd_level: i32,
    /// The log (one of the shim's own descriptors, checked at each use), shared with the
    /// recorder thread's writer.
    pub fd: std::sync::Arc<recorder::ownfd::OwnFd>,
    pub log_path: String,
    /// Bytes reserved for the header JSON (rewritten in place once calibrated).
    pub header_reserved: u32,
    /// SHIM_LOG as given (None: the default), for the logs of fork children.
    pub log_pattern: Option<String>,
    /// Reference clock pair, and wall-clock time at it.
    pub p0: clock::Pair,
    pub start_unix_ns: u64,
    pub forked: bool,
    pub ppid: u32,
    /// The process this log belongs to (a vfork or _Fork child shares or copies our state
    /// without running any handler: it must never flush).
    pub pid: u32,
    /// Capture windows (None: one window from start to exit, in this one log); with them,
    /// this log is the watch log (window 0) and each window has a log of its own.
    pub windows: Option<Windows>,
    /// SHIM_STALL in ns.
    pub stall_ns: u64,
    /// SHIM_LOG_LIMIT in bytes (u64::MAX: none), and SHIM_LOG_FULL=rotate.
    pub log_limit: u64,
    pub rotate: bool,
    /// SHIM_CONTROL=1.
    pub control: bool,
    /// SHIM_CRASH_SAFE: buffers in the in-flight file beside the log.
    pub crash_safe: bool,
    /// SHIM_INFLIGHT_DIR (or /dev/shm): where the user's in-flight directory is.
    pub inflight_base: String,
    /// SHIM_INFLIGHT_MAX in bytes (None: off, other processes' files are left alone).
    pub inflight_max: Option<u64>,
    /// SHIM_RECORD=sample: only sampled allocations, their frees and slow calls.
    pub sample_only: bool,
    /// SHIM_PACK: how the recorder packs buffers (background/packing).
    pub pack: Pack,
    /// In a fork child: the parent's log, and the moment of the fork (log ticks).
    pub parent_log: Option<String>,
    pub fork_ticks: Option<u64>,
}

/// SHIM_SIGNAL deliveries not yet seen by the recorder (each toggles a window).
pub static SIGNALS: AtomicU64 = AtomicU64::new(0);

/// The SHIM_SIGNAL handler: async-signal-safe, one atomic add and a futex wake.
pub extern "C" fn on_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Relaxed);
    crate::wake::nudge();
}

pub struct GlobalCell(AtomicPtr<Globals>);
impl GlobalCell {
    /// Only valid once the state has been RECORDING.
    #[inline(always)]
    pub fn get(&self) -> &'static Globals {
        unsafe { &*self.0.load(Acquire) }
    }
    pub fn set(&self, g: Box<Globals>) {
        self.0.store(Box::into_raw(g), Release);
    }
}
pub static G: GlobalCell = GlobalCell(AtomicPtr::new(core::ptr::null_mut()));

/// The recorder should drain what is queued, close the log and exit.
pub static SHUTDOWN: AtomicBool = AtomicBool::new(false);
pub static RECORDER_RUNNING: AtomicBool = AtomicBool::new(false);
pub static RECORDER_DONE: AtomicBool = AtomicBool::new(false);
/// Tick count when recording stopped (0: not yet), written in the End record.
pub static CUT_TICKS: AtomicU64 = AtomicU64::new(0);
/// Calls served but not recorded (after thread exit or the final flush).
pub static UNTRACED: AtomicU64 = AtomicU64::new(0);
/// A thread's partial buffer is handed over once its first record is this many log ticks
/// old (one second; a guess until the recorder has calibrated).
pub static FLUSH_TICKS: AtomicU64 = AtomicU64::new(1 << 27);
/// Ticks per second (f64 bits), known once the recorder has calibrated.
pub static TPS_BITS: AtomicU64 = AtomicU64::new(0);
/// How the process ends, once known: 0 not yet, else `1 << 63 | how << 32 | status` (how:
/// recorder::exit_how). Written before the final flush, read by the recorder's last records.
pub static EXIT: AtomicU64 = AtomicU64::new(0);

pub fn note_exit(how: u64, status: i32) {
    let _ = EXIT.compare_exchange(0, 1 << 63 | how << 32 | status as u32 as u64, Relaxed, Relaxed);
}

/// fork() calls made while watching (the recorder writes them to the watch log).
pub static FORKS: AtomicU64 = AtomicU64::new(0);
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(4096);

#[inline(always)]
pub fn flush_ticks() -> u64 {
    FLUSH_TICKS.load(Relaxed)
}
pub fn recorder_running() -> bool {
    RECORDER_RUNNING.load(Acquire) && !RECORDER_DONE.load(Acquire)
}
pub fn page_size() -> usize {
    PAGE_SIZE.load(Relaxed)
}
pub fn set_page_size() {
    PAGE_SIZE.store(unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize, Relaxed);
}
pub fn count_untraced() {
    UNTRACED.fetch_add(1, Relaxed);
}

/// One line on stderr, straight to fd 2.
pub fn say(msg: &str) {
    let mut line = [0u8; 512];
    let n = msg.len().min(line.len() - 1);
    line[..n].copy_from_slice(&msg.as_bytes()[..n]);
    line[n] = b'\n';
    unsafe { libc::write(2, line.as_ptr() as *const libc::c_void, n + 1) };
}

/// A full barrier on every running thread of the process. False where the kernel has no
/// membarrier: then only a 1 ms sleep, which a thread's next call will almost always have
/// seen past, but no guarantee.
pub fn membarrier() -> bool {
    unsafe {
        if libc::syscall(libc::SYS_membarrier, 8 /* PRIVATE_EXPEDITED */, 0, 0) == 0 {
            return true;
        }
        if libc::syscall(libc::SYS_membarrier, 1 /* GLOBAL */, 0, 0) == 0 {
            return true;
        }
        libc::usleep(1000);
        false
    }
}

/// Starts `entry` on a detached raw pthread (std's spawn would register TLS destructors and
/// allocate on the new thread before it could mark itself internal). False when it could not.
pub fn spawn_detached(entry: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void) -> bool {
    unsafe {
        let mut th: libc::pthread_t = 0;
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let rc = libc::pthread_create(&mut th, &attr, entry, core::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        rc == 0
    }
}
