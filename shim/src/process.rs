//! The process's lifecycle: the constructor (patching the program's own allocator,
//! starting the recorder), the fork handlers (a child gets a new log and recorder), the
//! exported exec family, `_exit`, `_Exit` and `abort` (the log is flushed or marked
//! first), and the final flush at exit. Above the hot path: nothing imports this file.
#![allow(clippy::missing_safety_doc)]
use crate::background::recorder_thread;
use crate::c_rules::set_errno;
use crate::shared::{self, say, Globals, CUT_TICKS, G, RECORDER_DONE, RECORDER_RUNNING, SHUTDOWN, UNTRACED};
use crate::thread::{tls, REGISTRY};
use crate::{init, state};
use core::sync::atomic::Ordering::*;
use recorder::clock;

/// .init_array: patch the program's own allocator if it brings one, start the recorder,
/// hook fork and exit.
extern "C" fn constructor() {
    let t = tls::get();
    t.busy += 1;
    init::ensure_init();
    // Before the recorder thread starts: patching needs the process to have one thread.
    // (Done already, at the first call, when the program links an allocator library.)
    crate::patch::install(init::choice(), state::tracing());
    if state::tracing() {
        crate::patch::later::note_start();
        init::rewrite_header();
        unsafe {
            libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
            // on_exit rather than atexit: the handler learns the exit status.
            on_exit(at_exit, core::ptr::null_mut());
        }
        recorder_thread::start();
    }
    resolve_abort();
    t.busy -= 1;
}

unsafe extern "C" {
    fn on_exit(f: extern "C" fn(i32, *mut libc::c_void), arg: *mut libc::c_void) -> i32;
}

/// exit() or a return from main: the status goes into the log, then everything else.
extern "C" fn at_exit(status: i32, _: *mut libc::c_void) {
    shared::note_exit(recorder::exit_how::EXIT, status);
    final_flush();
}

/// abort(): the in-flight file says so (one store, async-signal-safe), for recovery to
/// tell after the SIGABRT that follows.
pub fn on_abort() {
    if state::tracing() && own_process() {
        if let Some(f) = G.get().pool.inflight() {
            f.note_ending(recorder::recovered_end::ABORT as u32);
        }
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static CONSTRUCTOR: extern "C" fn() = constructor;

extern "C" fn fork_prepare() {
    if state::tracing() {
        crate::thread::QUIESCE.lock();
        REGISTRY.lock();
    }
}

extern "C" fn fork_parent() {
    if state::tracing() {
        REGISTRY.unlock();
        crate::thread::QUIESCE.unlock();
        if !state::writing() {
            shared::FORKS.fetch_add(1, Relaxed);
        }
        crate::hot::record::note(recorder::Op::Fork, 0);
    }
}

/// In the child: one thread, a fresh pool, a new log for the new pid, a new recorder.
extern "C" fn fork_child() {
    if !state::tracing() {
        return;
    }
    // The shim's threads are not in the child: nothing of theirs is under way.
    crate::thread::QUIESCE.unlock();
    recorder::ownfd::after_fork_child();
    let t = tls::get();
    t.busy += 1;
    if state::stopping() {
        // Forked during the final flush: the child forwards only.
        stop_for_good();
    } else {
        restart(true);
    }
    t.busy -= 1;
}

/// Recording stays off in this process from now on.
fn stop_for_good() {
    state::off_for_good();
    unsafe { REGISTRY.reset_to(core::ptr::null_mut()) };
}

/// Starts a new log for this process, with one thread: after fork (in the child) or after
/// an exec that failed. Every other thread state, the old pool and its buffers are
/// abandoned (they may have been mid-update); the calling thread registers again on its
/// next call.
fn restart(forked: bool) {
    let old = G.get();
    let fork_ticks = clock::to_log(clock::now());
    if forked {
        // The parent's in-flight file and its lock stay the parent's.
        if let Some(f) = old.pool.inflight() {
            f.forget_in_child();
        }
    }
    let Some((fd, log_path)) = init::open_log(old.log_pattern.as_deref(), old.windows.map(|_| 0)) else {
        stop_for_good();
        return;
    };
    let p0 = clock::pair();
    let g = Box::new(Globals {
        pool: init::new_pool(&log_path, old.crash_safe, &old.inflight_base, p0),
        inflight_base: old.inflight_base.clone(),
        inflight_max: old.inflight_max,
        timing_period: old.timing_period,
        timing: old.timing,
        on_full: old.on_full,
        backend: old.backend,
        zstd_level: old.zstd_level,
        fd: std::sync::Arc::new(fd),
        log_path,
        header_reserved: 0,
        log_pattern: old.log_pattern.clone(),
        p0,
        start_unix_ns: clock::unix_ns(),
        forked: forked || old.forked,
        ppid: unsafe { libc::getppid() } as u32,
        pid: unsafe { libc::getpid() } as u32,
        windows: old.windows,
        stall_ns: old.stall_ns,
        log_limit: old.log_limit,
        rotate: old.rotate,
        control: old.control,
        crash_safe: old.crash_safe,
        sample_only: old.sample_only,
        pack: old.pack,
        parent_log: if forked { Some(old.log_path.clone()) } else { old.parent_log.clone() },
        fork_ticks: if forked { Some(fork_ticks) } else { old.fork_ticks },
    });
    if forked {
        old.fd.close_now(); // the parent's log stays the parent's
    }
    let Some(g) = init::with_header(g) else {
        stop_for_good();
        return;
    };
    G.set(g);
    UNTRACED.store(0, Relaxed);
    CUT_TICKS.store(0, Relaxed);
    shared::EXIT.store(0, Relaxed);
    RECORDER_RUNNING.store(false, Release);
    RECORDER_DONE.store(false, Release);
    SHUTDOWN.store(false, Release);
    crate::wake::reset();
    unsafe { REGISTRY.reset_to(core::ptr::null_mut()) };
    tls::get().state = core::ptr::null_mut();
    if G.get().windows.is_some() {
        state::start_watching();
    } else {
        state::start_recording(G.get().sample_only);
    }
    recorder_thread::start();
}

/// True in the process that owns the log (not in a vfork or _Fork child).
fn own_process() -> bool {
    unsafe { libc::getpid() as u32 == G.get().pid }
}

/// Before exec: the new image loads the shim afresh, so write everything now.
pub fn before_exec() -> bool {
    if !matches!(state::get(), state::RECORDING | state::SAMPLING | state::WATCHING) || !own_process() {
        return false;
    }
    shared::note_exit(recorder::exit_how::EXEC, 0);
    final_flush();
    true
}

/// Before _exit/_Exit, which run no atexit handler.
pub fn before_exit(status: i32) {
    if state::tracing() && own_process() {
        shared::note_exit(recorder::exit_how::UNDERSCORE_EXIT, status);
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
        shared::EXIT.store(0, Relaxed);
        restart(false);
    } else {
        say("shim: exec failed in a multi-threaded process; recording stopped, the program continues");
        stop_for_good();
    }
    t.busy -= 1;
}

/// atexit: every thread's buffer reaches the log, then the recorder closes it.
///
/// Handshake with the hot path: a thread stores its call number to `in_call` and then loads
/// its `halt`; here `halt` is stored and, after membarrier (a full barrier on every running
/// thread), `in_call` is loaded. So either the thread sees STOP and hands its own buffer
/// over, or this sees it inside a call and waits for it to leave.
pub extern "C" fn final_flush() {
    if !state::tracing() || state::stopping() && RECORDER_DONE.load(Acquire) {
        return;
    }
    let t = tls::get();
    t.busy += 1;
    let threads = crate::thread::halt_all();
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
    crate::wake::nudge();
    let deadline = clock::mono_ns() + 5_000_000_000;
    while RECORDER_RUNNING.load(Acquire) && !RECORDER_DONE.load(Acquire) && clock::mono_ns() < deadline {
        unsafe { libc::usleep(200) };
    }
    if RECORDER_DONE.load(Acquire) && own_process() {
        // Everything the threads recorded is in the log: the in-flight file has no more use.
        if let Some(f) = G.get().pool.inflight() {
            f.remove();
        }
    }
    state::closed();
    t.busy -= 1;
}

// exec: the new image loads the shim afresh and writes its own log, so this one is flushed
// and closed first. glibc's exec functions call each other internally, out of reach of
// interposition, so each is wrapped; the variadic execl family is in exec.c (it builds an
// argv and calls these).

type Argv = *const *const libc::c_char;

/// The next definition of `name` (glibc's), looked up once.
fn real(slot: &core::sync::atomic::AtomicUsize, name: &core::ffi::CStr) -> usize {
    use core::sync::atomic::Ordering::Relaxed;
    let mut f = slot.load(Relaxed);
    if f == 0 {
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        slot.store(f, Relaxed);
    }
    f
}

macro_rules! exec_hook {
    ($name:ident, $cname:literal, ($($a:ident: $t:ty),*)) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> i32 {
            static REAL: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
            let f = real(&REAL, $cname);
            if f == 0 {
                set_errno(libc::ENOSYS);
                return -1;
            }
            let f: unsafe extern "C" fn($($t),*) -> i32 = unsafe { core::mem::transmute(f) };
            let flushed = before_exec();
            let rc = unsafe { f($($a),*) };
            if flushed {
                let e = unsafe { *libc::__errno_location() };
                after_failed_exec();
                set_errno(e);
            }
            rc
        }
    };
}

exec_hook!(execve, c"execve", (path: *const libc::c_char, argv: Argv, envp: Argv));
exec_hook!(execv, c"execv", (path: *const libc::c_char, argv: Argv));
exec_hook!(execvp, c"execvp", (file: *const libc::c_char, argv: Argv));
exec_hook!(execvpe, c"execvpe", (file: *const libc::c_char, argv: Argv, envp: Argv));
exec_hook!(fexecve, c"fexecve", (fd: i32, argv: Argv, envp: Argv));

// _exit and _Exit run no atexit handler: flush first (dash, for one, ends with _exit).

#[unsafe(no_mangle)]
pub unsafe extern "C" fn _exit(status: i32) -> ! {
    before_exit(status);
    loop {
        // exit_group does not return.
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Exit(status: i32) -> ! {
    before_exit(status);
    loop {
        // exit_group does not return.
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}

// abort(): noted in the in-flight file (recovery then says the process aborted), then the
// C library's abort, unchanged. glibc's own calls to abort (assert, heap corruption checks)
// do not come here: their logs say "killed".

static REAL_ABORT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Looks the C library's abort up, from the constructor (dlsym may allocate: not in abort).
pub fn resolve_abort() {
    real(&REAL_ABORT, c"abort");
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn abort() -> ! {
    on_abort();
    let f = REAL_ABORT.load(core::sync::atomic::Ordering::Relaxed);
    if f != 0 {
        let f: unsafe extern "C" fn() -> ! = unsafe { core::mem::transmute(f) };
        unsafe { f() }
    }
    unsafe {
        libc::raise(libc::SIGABRT);
        libc::signal(libc::SIGABRT, libc::SIG_DFL);
        libc::raise(libc::SIGABRT);
    }
    loop {
        unsafe { libc::syscall(libc::SYS_exit_group, 127) };
    }
}

#[cfg(target_arch = "x86_64")]
mod variadic_exec {
    // Stable Rust cannot define a variadic function; these exported trampolines jump to the
    // C definitions in exec.c with every argument register and the stack untouched.
    unsafe extern "C" {
        fn shim_execl();
        fn shim_execlp();
        fn shim_execle();
    }
    macro_rules! trampoline {
        ($name:ident, $target:ident) => {
            #[unsafe(no_mangle)]
            #[unsafe(naked)]
            pub unsafe extern "C" fn $name() {
                core::arch::naked_asm!("jmp {}", sym $target)
            }
        };
    }
    trampoline!(execl, shim_execl);
    trampoline!(execlp, shim_execlp);
    trampoline!(execle, shim_execle);
}
