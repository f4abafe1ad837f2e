//! Start-up (lazy, on the first call, which can come before the constructor), the
//! constructor, fork, and the final flush at exit.
use crate::config::{self, OnFull, Timing};
use crate::thread::REGISTRY;
use crate::{recorder_thread, tls};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use recorder::clock;
use recorder::transport::Pool;
use shim_backend::{self as be, Backend};

/// Settings and shared objects of a recording process (replaced in a fork child).
pub struct Globals {
    pub pool: Pool,
    pub timing_period: u32,
    pub timing: Timing,
    pub on_full: OnFull,
    pub backend: Backend,
    pub zstd_level: i32,
    pub fd: i32,
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
}

pub struct GlobalCell(AtomicPtr<Globals>);
impl GlobalCell {
    /// Only valid once [`tracing`] has been true.
    #[inline(always)]
    pub fn get(&self) -> &'static Globals {
        unsafe { &*self.0.load(Acquire) }
    }
}
pub static G: GlobalCell = GlobalCell(AtomicPtr::new(core::ptr::null_mut()));

const UNINIT: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;
static INIT: AtomicU8 = AtomicU8::new(UNINIT);
static TRACING: AtomicBool = AtomicBool::new(false);
/// Initialised with recording off (SHIM_TRACE=0, setuid, no log): every call just forwards.
static FORWARD_ONLY: AtomicBool = AtomicBool::new(false);
/// Set once the final flush (or a write failure) has begun: threads stop recording.
pub static STOPPING: AtomicBool = AtomicBool::new(false);
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
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(4096);
/// SHIM_BACKEND as read at start-up (config::Choice, encoded), for the constructor.
static CHOICE: AtomicU8 = AtomicU8::new(0);

fn choice() -> config::Choice {
    match CHOICE.load(Relaxed) {
        0 => config::Choice::Unset,
        1 => config::Choice::Own,
        v => config::Choice::Switch(Backend::ALL.get((v - 2) as usize).copied().unwrap_or(Backend::Glibc)),
    }
}

#[inline(always)]
pub fn tracing() -> bool {
    TRACING.load(Relaxed)
}
#[inline(always)]
pub fn forwarding_only() -> bool {
    FORWARD_ONLY.load(Relaxed)
}
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

unsafe extern "C" {
    #[link_name = "_rjem_malloc_conf"]
    static mut JE_MALLOC_CONF: *const libc::c_char;
}

/// Initialises on the first call, whichever thread makes it; the caller has `busy` set so
/// that allocations made here pass straight through.
pub fn ensure_init() {
    if INIT.load(Acquire) == DONE {
        return;
    }
    if INIT.compare_exchange(UNINIT, RUNNING, AcqRel, Acquire).is_ok() {
        init();
        FORWARD_ONLY.store(!tracing(), Relaxed);
        INIT.store(DONE, Release);
    } else {
        while INIT.load(Acquire) != DONE {
            core::hint::spin_loop();
        }
    }
}

/// For entry points that forward without recording (malloc_usable_size).
pub fn ensure_init_untraced() {
    if INIT.load(Acquire) != DONE {
        let t = tls::get();
        t.busy += 1;
        ensure_init();
        t.busy -= 1;
    }
}

fn exe_path() -> String {
    std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn init() {
    let cfg = config::read();
    crate::patch::early(cfg.choice);
    CHOICE.store(match cfg.choice { config::Choice::Unset => 0, config::Choice::Own => 1, config::Choice::Switch(b) => 2 + b as u8 }, Relaxed);
    if cfg.backend == Backend::Jemalloc {
        if let Some(conf) = cfg.malloc_conf {
            // The prefixed jemalloc reads _RJEM_MALLOC_CONF; users set MALLOC_CONF. The value
            // points into the environment, NUL-terminated, and is read once at jemalloc's init.
            unsafe { JE_MALLOC_CONF = conf.as_ptr() as *const libc::c_char };
        }
    }
    be::select(cfg.backend);
    PAGE_SIZE.store(unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize, Relaxed);
    for w in cfg.warnings.iter().flatten() {
        say(w);
    }
    if !cfg.trace {
        return;
    }
    if unsafe { libc::getauxval(libc::AT_SECURE) } != 0 {
        return; // setuid/setgid: forward only, write nothing.
    }
    clock::init(cfg.monotonic_clock);
    let p0 = clock::pair();
    let start_unix_ns = clock::unix_ns();
    let pattern = cfg.log.map(|v| String::from_utf8_lossy(v).into_owned());
    let Some((fd, log_path)) = open_log(pattern.as_deref()) else { return };
    unsafe {
        libc::syscall(libc::SYS_membarrier, 16 /* REGISTER_PRIVATE_EXPEDITED */, 0, 0);
    }
    crate::thread::init_exit_key();
    let g = Box::new(Globals {
        pool: new_pool(),
        timing_period: cfg.timing.period(),
        timing: cfg.timing,
        on_full: cfg.on_full,
        backend: cfg.backend,
        zstd_level: cfg.zstd_level,
        fd,
        log_path,
        header_reserved: 0,
        log_pattern: pattern,
        p0,
        start_unix_ns,
        forked: false,
        ppid: unsafe { libc::getppid() } as u32,
        pid: unsafe { libc::getpid() } as u32,
    });
    let Some(g) = with_header(g) else { return };
    G.0.store(Box::into_raw(g), Release);
    TRACING.store(true, Release);
}

/// Rewrites the header in place, with what is known now (the program's own allocators).
fn rewrite_header() {
    let g = G.get();
    let tps = f64::from_bits(TPS_BITS.load(Relaxed));
    if let Err(e) = recorder::writer::rewrite_header(g.fd, &crate::header::build(g, tps), g.header_reserved) {
        say(&format!("shim: cannot rewrite the header of {}: {e}", g.log_path));
    }
}

/// Writes the header of a new log (provisional clock rate until the recorder calibrates).
/// None, with one line on stderr, when the write fails.
fn with_header(mut g: Box<Globals>) -> Option<Box<Globals>> {
    let tps = f64::from_bits(TPS_BITS.load(Relaxed));
    match recorder::writer::write_header(g.fd, &crate::header::build(&g, tps)) {
        Ok(r) => {
            g.header_reserved = r;
            Some(g)
        }
        Err(e) => {
            say(&format!("shim: cannot write log {}: {e}; the program runs without recording", g.log_path));
            unsafe { libc::close(g.fd) };
            None
        }
    }
}

fn new_pool() -> Pool {
    // 16 buffers of 64 KiB now, up to 64 shared ones, one more per thread beyond that.
    Pool::new(8192, 64, 16)
}

/// Creates the log named by SHIM_LOG (or the default); None, with one line on stderr, when
/// it cannot be created.
fn open_log(pattern: Option<&str>) -> Option<(i32, String)> {
    let exe = exe_path();
    let name = exe.rsplit('/').next().unwrap_or("unknown");
    let pid = unsafe { libc::getpid() } as u32;
    let path = recorder::writer::expand_pattern(pattern.unwrap_or(config::DEFAULT_LOG), pid, name);
    match recorder::writer::create_log(&path) {
        Ok(x) => Some(x),
        Err(e) => {
            say(&format!("shim: cannot create log {path}: {e}; the program runs without recording"));
            None
        }
    }
}

/// .init_array: patch the program's own allocator if it brings one, start the recorder,
/// hook fork and exit.
extern "C" fn constructor() {
    let t = tls::get();
    t.busy += 1;
    ensure_init();
    // Before the recorder thread starts: patching needs the process to have one thread.
    crate::patch::install(choice(), tracing());
    if tracing() {
        rewrite_header();
        unsafe {
            libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
            libc::atexit(final_flush);
        }
        recorder_thread::start();
    }
    t.busy -= 1;
}

#[used]
#[unsafe(link_section = ".init_array")]
static CONSTRUCTOR: extern "C" fn() = constructor;

extern "C" fn fork_prepare() {
    if tracing() {
        REGISTRY.lock();
    }
}

extern "C" fn fork_parent() {
    if tracing() {
        REGISTRY.unlock();
        crate::hot::note(recorder::Op::Fork, 0);
    }
}

/// In the child: one thread, a fresh pool, a new log for the new pid, a new recorder.
extern "C" fn fork_child() {
    if !tracing() {
        return;
    }
    let t = tls::get();
    t.busy += 1;
    if STOPPING.load(Relaxed) {
        // Forked during the final flush: the child forwards only.
        stop_for_good();
    } else {
        restart(true);
    }
    t.busy -= 1;
}

/// Recording stays off in this process from now on.
fn stop_for_good() {
    TRACING.store(false, Relaxed);
    FORWARD_ONLY.store(true, Relaxed);
    unsafe { REGISTRY.reset_to(core::ptr::null_mut()) };
}

/// Starts a new log for this process, with one thread: after fork (in the child) or after
/// an exec that failed. Every other thread state, the old pool and its buffers are
/// abandoned (they may have been mid-update); the calling thread registers again on its
/// next call.
fn restart(forked: bool) {
    let old = G.get();
    let Some((fd, log_path)) = open_log(old.log_pattern.as_deref()) else {
        stop_for_good();
        return;
    };
    let g = Box::new(Globals {
        pool: new_pool(),
        timing_period: old.timing_period,
        timing: old.timing,
        on_full: old.on_full,
        backend: old.backend,
        zstd_level: old.zstd_level,
        fd,
        log_path,
        header_reserved: 0,
        log_pattern: old.log_pattern.clone(),
        p0: clock::pair(),
        start_unix_ns: clock::unix_ns(),
        forked: forked || old.forked,
        ppid: unsafe { libc::getppid() } as u32,
        pid: unsafe { libc::getpid() } as u32,
    });
    if forked {
        unsafe { libc::close(old.fd) }; // the parent's log stays the parent's
    }
    let Some(g) = with_header(g) else {
        stop_for_good();
        return;
    };
    G.0.store(Box::into_raw(g), Release);
    UNTRACED.store(0, Relaxed);
    CUT_TICKS.store(0, Relaxed);
    RECORDER_RUNNING.store(false, Release);
    RECORDER_DONE.store(false, Release);
    SHUTDOWN.store(false, Release);
    unsafe { REGISTRY.reset_to(core::ptr::null_mut()) };
    tls::get().state = core::ptr::null_mut();
    STOPPING.store(false, SeqCst);
    TRACING.store(true, Release);
    recorder_thread::start();
}

/// True in the process that owns the log (not in a vfork or _Fork child).
fn own_process() -> bool {
    unsafe { libc::getpid() as u32 == G.get().pid }
}

/// Before exec: the new image loads the shim afresh, so write everything now.
pub fn before_exec() -> bool {
    if !tracing() || STOPPING.load(Relaxed) || !own_process() {
        return false;
    }
    final_flush();
    true
}

/// Before _exit/_Exit, which run no atexit handler.
pub fn before_exit() {
    if tracing() && own_process() {
        final_flush();
    }
}

/// The exec failed and the program goes on: record into a new log, when that is safe (no
/// other thread was recording, so none can still hold a buffer).
pub fn after_failed_exec() {
    let t = tls::get();
    t.busy += 1;
    let mut others = 0;
    let me = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    REGISTRY.for_each(|st| {
        if st.tid != me && !st.dead.load(Acquire) {
            others += 1;
        }
        true
    });
    if others == 0 {
        restart(false);
    } else {
        say("shim: exec failed in a multi-threaded process; recording stopped, the program continues");
        stop_for_good();
    }
    t.busy -= 1;
}

pub fn membarrier() {
    unsafe {
        if libc::syscall(libc::SYS_membarrier, 8 /* PRIVATE_EXPEDITED */, 0, 0) == 0 {
            return;
        }
        if libc::syscall(libc::SYS_membarrier, 1 /* GLOBAL */, 0, 0) == 0 {
            return;
        }
        libc::usleep(1000);
    }
}

/// atexit: every thread's buffer reaches the log, then the recorder closes it.
///
/// Handshake with the hot path: a thread stores its call number to `in_call` and then loads
/// its `halt`; here `halt` is stored and, after membarrier (a full barrier on every running
/// thread), `in_call` is loaded. So either the thread sees STOP and hands its own buffer
/// over, or this sees it inside a call and waits for it to leave.
pub extern "C" fn final_flush() {
    if !tracing() || STOPPING.load(Relaxed) && RECORDER_DONE.load(Acquire) {
        return;
    }
    let t = tls::get();
    t.busy += 1;
    let threads = halt_all();
    if (t.state as usize) > 1 {
        unsafe { (*t.state).close() };
        t.state = tls::EXITED;
    }
    let deadline = clock::mono_ns() + 200_000_000;
    for st in threads {
        let st = unsafe { &mut *st };
        while st.in_call.load(Acquire) != 0 && clock::mono_ns() < deadline {
            unsafe { libc::usleep(100) };
        }
        if st.in_call.load(Acquire) == 0 {
            st.close();
        }
    }
    SHUTDOWN.store(true, Release);
    let deadline = clock::mono_ns() + 5_000_000_000;
    while RECORDER_RUNNING.load(Acquire) && !RECORDER_DONE.load(Acquire) && clock::mono_ns() < deadline {
        unsafe { libc::usleep(200) };
    }
    TRACING.store(false, Release);
    t.busy -= 1;
}

/// Stops recording on every thread: sets STOPPING (for threads not yet registered) and
/// each registered thread's `halt` to STOP, then makes that visible to every running
/// thread. Returns the threads, which stay allocated (nothing is reaped once STOPPING).
pub fn halt_all() -> Vec<*mut crate::thread::ThreadState> {
    // Calls stamped after this are left out by readers: threads stop one by one, and a
    // block one freed unrecorded may be reused by another still recording.
    let _ = CUT_TICKS.compare_exchange(0, clock::now(), SeqCst, Relaxed);
    STOPPING.store(true, SeqCst);
    let mut threads = Vec::new();
    REGISTRY.for_each(|st| {
        st.halt.store(crate::thread::STOP, SeqCst);
        threads.push(st as *mut _);
        true
    });
    membarrier();
    threads
}
