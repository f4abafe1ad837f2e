//! The per-thread buffer: each thread's recording state, the record appended to its
//! buffer ([`append`], the last step of every recorded call) and the buffer's hand-over to
//! the recorder, the enter/leave handshake with the recorder and the final flush, the
//! registry of all threads, and the TLS block (tls.c) every hooked call reads first.
//!
//! A thread registers on its first traced call (slow path): it gets a stream number, a
//! buffer, a ThreadStart record, and a pthread key whose destructor writes ThreadExit and
//! hands the last buffer over when the thread ends. The registry is an array behind a
//! spinlock taken only off the hot path (registration, exit, the recorder's housekeeping,
//! fork), so fork's prepare handler can hold it across fork.
use crate::config::OnFull;
use crate::shared::{self, G};
use crate::{state, wake};
use core::sync::atomic::{compiler_fence, AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use recorder::buffer::{Args, Buf};
use recorder::{clock, Op};

pub struct ThreadState {
    pub buf: *mut Buf,
    pub stream: u32,
    pub tid: u32,
    /// Counts down to the next timed call (0: timing off).
    pub countdown: u32,
    /// Events discarded since the last Dropped record that reached the recorder.
    pub dropped: u64,
    /// The current buffer holds a Dropped record carrying `dropped`.
    pub dropped_noted: bool,
    /// Records at the head of the current buffer that are not calls (ThreadStart, Dropped).
    pub meta: u32,
    /// A buffer of this stream (so its ThreadStart) has reached the recorder.
    pub delivered: bool,
    /// Set by others, checked on entry: RUN, TAKE (the recorder is taking the buffer of an
    /// idle thread: wait), STOP (the final flush: forward from now on).
    pub halt: core::sync::atomic::AtomicU8,
    /// Serial number of the call in progress, 0 when none (read by the watchdog and by
    /// the final flush).
    pub in_call: AtomicU64,
    /// Calls so far (written by the thread only; read by the recorder's pace).
    pub calls: AtomicU64,
    /// Set by the watchdog: call `slow_call` has been inside the backend since `slow_since`.
    pub slow_call: AtomicU64,
    pub slow_since: AtomicU64,
    /// The watchdog's own notes: which call it saw last, and when.
    pub wd_call: u64,
    pub wd_at: u64,
    /// The call the watchdog follows as a stall (0: none), and when it last saw it.
    pub wd_stall: u64,
    pub wd_last: u64,
    /// The watch log has this thread's start (windows only).
    pub seen: bool,
    /// The last buffer was handed to the recorder (exit, final flush): no more records.
    pub closed: AtomicBool,
    pub dead: AtomicBool,
}

/// Asks for a thread's state ahead of its turn in a walk.
#[inline(always)]
fn prefetch(t: Option<*mut ThreadState>) {
    #[cfg(target_arch = "x86_64")]
    if let Some(t) = t {
        unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(t as *const i8) };
    }
}

/// The registry: an array of every live (and not yet reaped) thread. An array, not a list:
/// the recorder's walk on every tick loads each thread's state, and from an array those
/// loads go out together, where a list's wait one for the other (a server's thousand idle
/// threads cost a list 40 µs a tick, a cache miss each).
pub struct Registry {
    lock: AtomicBool,
    threads: core::cell::UnsafeCell<Vec<*mut ThreadState>>,
}
unsafe impl Sync for Registry {}

/// Held by the shim's own threads (the recorder, the reclaimer) while they work, and by
/// `fork` from its prepare handler to its end: a fork never happens while one of them is
/// inside the backend, whose locks (snmalloc's range lock, say) the child would inherit held.
/// Taken before [`REGISTRY`], never after it.
pub static QUIESCE: Quiesce = Quiesce { held: AtomicBool::new(false), forks: AtomicU32::new(0) };

/// A lock taken and released by hand (the fork handlers take it in one and release it in
/// another). A fork waiting for it goes first: the shim's threads take it again only once no
/// fork waits ([`Quiesce::relock`]).
pub struct Quiesce {
    held: AtomicBool,
    forks: AtomicU32,
}

impl Quiesce {
    /// For fork: waits until the shim's threads are between two pieces of work.
    pub fn lock(&self) {
        self.forks.fetch_add(1, SeqCst);
        while self.held.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
            std::thread::yield_now();
        }
        self.forks.fetch_sub(1, SeqCst);
    }
    /// For the shim's threads, between two pieces of work: after any fork that waits.
    pub fn relock(&self) {
        loop {
            while self.forks.load(SeqCst) != 0 {
                std::thread::yield_now();
            }
            if self.held.compare_exchange(false, true, Acquire, Relaxed).is_ok() {
                return;
            }
            std::thread::yield_now();
        }
    }
    /// [`Quiesce::relock`] without waiting: false when a fork waits or the lock is held.
    pub fn try_relock(&self) -> bool {
        self.forks.load(SeqCst) == 0 && self.held.compare_exchange(false, true, Acquire, Relaxed).is_ok()
    }
    pub fn unlock(&self) {
        self.held.store(false, Release);
    }
}

pub static REGISTRY: Registry =
    Registry { lock: AtomicBool::new(false), threads: core::cell::UnsafeCell::new(Vec::new()) };
static NEXT_STREAM: AtomicU32 = AtomicU32::new(1);

pub const RUN: u8 = 0;
pub const TAKE: u8 = 1;
pub const STOP: u8 = 2;
/// A window has opened since the thread last recorded: on its next recorded call it takes
/// a buffer and starts its stream in the window's log.
pub const REARM: u8 = 3;
/// Bit set in `in_call` for a call made while watching (it never touches the buffer).
pub const WATCHED: u64 = 1 << 63;

impl Registry {
    pub fn lock(&self) {
        while self.lock.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
            core::hint::spin_loop();
        }
    }
    pub fn unlock(&self) {
        self.lock.store(false, Release);
    }
    /// Calls `f` on every registered thread with the lock held; `f` returns false to
    /// unlink (and free) a thread it found dead.
    pub fn for_each(&self, mut f: impl FnMut(&mut ThreadState) -> bool) {
        self.lock();
        let v = unsafe { &mut *self.threads.get() };
        let mut i = 0;
        while i < v.len() {
            prefetch(v.get(i + 4).copied());
            let t = v[i];
            if f(unsafe { &mut *t }) {
                i += 1;
            } else {
                v.swap_remove(i);
                drop(unsafe { Box::from_raw(t) });
            }
        }
        self.unlock();
    }
    /// Calls `f` on every registered thread; the caller holds the lock.
    pub fn for_each_locked(&self, mut f: impl FnMut(&mut ThreadState)) {
        let v = unsafe { &*self.threads.get() };
        for (i, &t) in v.iter().enumerate() {
            prefetch(v.get(i + 4).copied());
            f(unsafe { &mut *t });
        }
    }
    /// Adds a thread. The array grows outside the lock (a fork's prepare handler may hold
    /// the allocator's locks while it waits for this one).
    fn push(&self, t: *mut ThreadState) {
        loop {
            self.lock();
            let v = unsafe { &mut *self.threads.get() };
            if v.len() < v.capacity() {
                v.push(t);
                self.unlock();
                return;
            }
            let want = (v.capacity() * 2).max(64);
            self.unlock();
            let mut bigger: Vec<*mut ThreadState> = Vec::with_capacity(want);
            self.lock();
            let v = unsafe { &mut *self.threads.get() };
            if v.capacity() < want {
                // Nobody grew it meanwhile: its threads fit (len <= capacity < want).
                bigger.extend_from_slice(v);
                core::mem::swap(v, &mut bigger);
            }
            self.unlock();
            // The old array, or the new one another thread's growth made needless.
            drop(bigger);
        }
    }
    /// After fork, in the child: only `keep` still exists; the rest is abandoned (the array
    /// keeps its capacity, so this allocates nothing).
    pub unsafe fn reset_to(&self, keep: *mut ThreadState) {
        let v = unsafe { &mut *self.threads.get() };
        v.clear();
        if !keep.is_null() {
            v.push(keep);
        }
        self.lock.store(false, Release);
    }
}

static mut EXIT_KEY: libc::pthread_key_t = 0;

pub fn init_exit_key() {
    unsafe { libc::pthread_key_create(&raw mut EXIT_KEY, Some(on_thread_exit)) };
}

/// First traced call of a thread. Called with `busy` set. While watching, the thread gets
/// no buffer until a window opens (`REARM`).
#[cold]
pub fn register() -> *mut ThreadState {
    let stream = NEXT_STREAM.fetch_add(1, Relaxed);
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    let g = G.get();
    let watching = state::get() == state::WATCHING;
    let buf = if watching {
        core::ptr::null_mut()
    } else {
        match g.pool.take_empty(stream, true) {
            Some(b) => b,
            None => return core::ptr::null_mut(),
        }
    };
    let st = Box::into_raw(Box::new(ThreadState {
        buf,
        stream,
        tid,
        countdown: g.timing_period,
        dropped: 0,
        dropped_noted: false,
        meta: 0,
        delivered: false,
        halt: core::sync::atomic::AtomicU8::new(if watching { REARM } else { RUN }),
        in_call: AtomicU64::new(0),
        calls: AtomicU64::new(0),
        slow_call: AtomicU64::new(0),
        slow_since: AtomicU64::new(0),
        wd_call: 0,
        wd_at: 0,
        wd_stall: 0,
        wd_last: 0,
        seen: false,
        closed: AtomicBool::new(watching),
        dead: AtomicBool::new(false),
    }));
    unsafe {
        if !watching {
            (*st).start_stream();
        }
        libc::pthread_setspecific(EXIT_KEY, st as *const libc::c_void);
    }
    REGISTRY.push(st);
    if state::stopping() || !watching && !state::writing() {
        // The final flush or a window's close may have listed the threads before this
        // one joined.
        unsafe { (*st).halt.store(STOP, SeqCst) };
    }
    // Its calls are new to a dozing recorder's watchdog (and the store above may have
    // wiped the WAKE it was given since the push).
    wake::nudge();
    st
}

/// A window is open and this thread records for the first time in it: a buffer, and its
/// stream's start. False (the call is not recorded) when no buffer can be had or the
/// window closed meanwhile.
#[cold]
#[inline(never)]
fn rearm(st: &mut ThreadState) -> bool {
    let g = G.get();
    if st.closed.load(Acquire) {
        match g.pool.take_empty(st.stream, true) {
            Some(b) => st.buf = b,
            None => return false,
        }
    } else {
        // A buffer an earlier window's close could not wait for: it belongs to no open log.
        g.pool.reuse(st.buf, st.stream);
    }
    st.meta = 0;
    st.delivered = false;
    st.dropped = 0;
    st.dropped_noted = false;
    st.countdown = g.timing_period;
    st.start_stream();
    st.closed.store(false, Release);
    loop {
        match st.halt.compare_exchange(REARM, RUN, SeqCst, Relaxed) {
            Ok(_) => return true,
            // The recorder began to doze meanwhile.
            Err(h) if h & wake::WAKE != 0 => woken(st),
            Err(_) => return false,
        }
    }
}

impl ThreadState {
    /// Counts a call; its number (plain loads and stores: only this thread writes it).
    #[inline(always)]
    pub fn next_call(&self) -> u64 {
        let n = self.calls.load(Relaxed) + 1;
        self.calls.store(n, Relaxed);
        n
    }

    /// Writes the ThreadStart record that opens this thread's stream.
    pub fn start_stream(&mut self) {
        let a = Args { value: self.tid as u64, ..Args::default() };
        unsafe { (*self.buf).push(Op::ThreadStart, clock::to_log(clock::now()), &a, None) };
        self.meta += 1;
    }

    /// `full` has reached the recorder's queue; `next` is the buffer to fill now.
    pub fn handed_over(&mut self, next: *mut Buf) {
        self.buf = next;
        self.delivered = true;
        self.meta = 0;
        if self.dropped_noted {
            self.dropped = 0;
            self.dropped_noted = false;
        }
    }

    /// Hands the current buffer to the recorder and takes an empty one (or, when none is
    /// free, waits for one or discards this one, as SHIM_ON_FULL says).
    #[cold]
    pub fn swap_buffer(&mut self) {
        let g = G.get();
        let full = self.buf;
        let next = match g.pool.take_empty(self.stream, !shared::recorder_running()) {
            Some(b) => Some(b),
            None if g.on_full == OnFull::Block => self.wait_for_empty(),
            None => None,
        };
        match next {
            Some(b) => {
                g.pool.send_full(full);
                wake::nudge();
                self.handed_over(b);
            }
            None => unsafe {
                // Drop: discard this buffer's calls, and say so at the head of the next one
                // (with the stream's ThreadStart again if it never reached the recorder).
                self.dropped += ((*full).n - self.meta) as u64;
                (*full).reset(self.stream);
                self.meta = 0;
                if !self.delivered {
                    self.start_stream();
                }
                let a = Args { value: self.dropped, ..Args::default() };
                (*full).push(Op::Dropped, clock::to_log(clock::now()), &a, None);
                self.meta += 1;
                self.dropped_noted = true;
            },
        }
    }

    fn wait_for_empty(&mut self) -> Option<*mut Buf> {
        let g = G.get();
        let mut spins = 0u32;
        loop {
            if let Some(b) = g.pool.take_empty(self.stream, false) {
                return Some(b);
            }
            if !shared::recorder_running() {
                // Nobody will ever empty a buffer: grow rather than hang.
                return g.pool.take_empty(self.stream, true);
            }
            spins += 1;
            if spins < 64 {
                core::hint::spin_loop();
            } else {
                unsafe { libc::usleep(50) };
            }
        }
    }

    /// Hands the last buffer over (exit, final flush). Only one caller wins.
    pub fn close(&mut self) -> bool {
        if self.closed.swap(true, AcqRel) {
            return false;
        }
        let g = G.get();
        if unsafe { (*self.buf).is_empty() } {
            g.pool.give_back(self.buf);
        } else {
            g.pool.send_full(self.buf);
            wake::nudge();
        }
        true
    }
}

/// pthread key destructor: the thread is ending.
unsafe extern "C" fn on_thread_exit(p: *mut libc::c_void) {
    let t = tls::get();
    let st = p as *mut ThreadState;
    if st.is_null() || t.state != st {
        return;
    }
    t.busy += 1;
    let s = unsafe { &mut *st };
    // Same handshake as a hooked call, so the final flush never takes this buffer under us.
    if enter(s) && !s.closed.load(Acquire) {
        if !unsafe { (*s.buf).has_room() } {
            s.swap_buffer();
        }
        unsafe { (*s.buf).push(Op::ThreadExit, clock::to_log(clock::now()), &Args::default(), None) };
        leave(s);
        s.close();
    } else {
        leave(s);
    }
    s.dead.store(true, Release);
    t.state = tls::EXITED;
    t.busy -= 1;
}

/// Marks the thread as inside the shim. False when the final flush has begun or the
/// window closed: the caller then forwards without recording (see
/// `process::final_flush` for the handshake).
#[inline(always)]
pub fn enter(st: &mut ThreadState) -> bool {
    let n = st.next_call();
    st.in_call.store(n, Relaxed);
    compiler_fence(SeqCst);
    st.halt.load(Relaxed) == RUN || halted(st)
}

/// Someone else wants this thread's buffer: wait while the recorder takes it (TAKE), or
/// stop recording (STOP); or the recorder dozes (WAKE): wake it, then go on as the rest
/// of `halt` says.
#[cold]
#[inline(never)]
fn halted(st: &mut ThreadState) -> bool {
    loop {
        match st.halt.load(Acquire) {
            h if h & wake::WAKE != 0 => woken(st),
            RUN => return true,
            TAKE => core::hint::spin_loop(),
            REARM => return state::get() == state::RECORDING && rearm(st),
            _ => return false,
        }
    }
}

/// This thread's call is the first since the recorder began to doze: wake it, so that its
/// watchdog sees the call (background/pace.rs).
#[cold]
#[inline(never)]
pub fn woken(st: &mut ThreadState) {
    st.halt.fetch_and(!wake::WAKE, SeqCst);
    wake::nudge();
}

#[inline(always)]
pub fn leave(st: &mut ThreadState) {
    compiler_fence(SeqCst);
    st.in_call.store(0, Relaxed);
}

/// Appends one record to the thread's buffer, handing the buffer over first when it is full
/// or its first record a second old. Plain stores (a full buffer's hand-over aside).
#[inline(always)]
pub fn append(st: &mut ThreadState, op: Op, ts: u64, a: &Args, bt: Option<u64>) {
    let b = unsafe { &mut *st.buf };
    let ts = clock::to_log(ts);
    let age = ts.wrapping_sub(b.first_ticks);
    if !b.has_room() || (b.n != 0 && age > shared::flush_ticks()) {
        st.swap_buffer();
    }
    unsafe { (*st.buf).push(op, ts, a, bt.map(clock::to_log)) };
}

/// Stops recording on every thread: moves the state to STOPPING (for threads not yet registered) and
/// each registered thread's `halt` to STOP, then makes that visible to every running
/// thread. Returns the threads, which stay allocated (nothing is reaped once STOPPING).
pub fn halt_all() -> Vec<*mut ThreadState> {
    // Calls stamped after this are left out by readers: threads stop one by one, and a
    // block one freed unrecorded may be reused by another still recording.
    let _ = shared::CUT_TICKS.compare_exchange(0, clock::now(), SeqCst, Relaxed);
    state::begin_stop();
    let mut threads = Vec::new();
    REGISTRY.for_each(|st| {
        st.halt.store(STOP, SeqCst);
        threads.push(st as *mut _);
        true
    });
    shared::membarrier();
    threads
}

/// A window closes (the state is WATCHING already): every registered thread stops
/// recording, and once out of the call it may be in, its buffer is handed over. Runs on the
/// recorder thread, the only one that reaps, so the threads stay allocated meanwhile.
/// Returns how many threads stayed in a recorded call for over `wait_ns` (their buffer is
/// left to them; the next window discards it).
pub fn close_window_threads(wait_ns: u64) -> u32 {
    let mut threads: Vec<*mut ThreadState> = Vec::new();
    REGISTRY.for_each(|st| {
        st.halt.store(STOP, SeqCst);
        threads.push(st as *mut _);
        true
    });
    shared::membarrier();
    let deadline = clock::mono_ns() + wait_ns;
    let mut stuck = 0;
    for st in threads {
        let st = unsafe { &mut *st };
        let v = st.in_call.load(SeqCst);
        if v != 0 && v & WATCHED == 0 {
            while st.in_call.load(Acquire) == v && clock::mono_ns() < deadline {
                unsafe { libc::usleep(50) };
            }
            if st.in_call.load(Acquire) == v {
                stuck += 1;
                continue;
            }
        }
        st.close();
    }
    stuck
}

/// A window opens (the state is still WATCHING): every registered thread takes a buffer
/// on its next recorded call.
pub fn arm_window_threads() {
    REGISTRY.for_each(|st| {
        st.halt.store(REARM, SeqCst);
        true
    });
}

/// The initial-exec TLS block defined in tls.c: each thread's pointer to its
/// [`ThreadState`] and its `busy` flag, the first thing every hooked call reads.
pub mod tls {
    use super::ThreadState;

    #[repr(C)]
    pub struct Tls {
        /// This thread's recording state: null until it registers, [`EXITED`] after its exit.
        pub state: *mut ThreadState,
        /// Non-zero while inside the shim: nested calls pass straight through.
        pub busy: u32,
    }

    #[allow(improper_ctypes)]
    unsafe extern "C" {
        #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
        fn shim_tls() -> *mut Tls;
        #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
        static mut shim_tls_block: Tls;
    }

    /// The calling thread's block. Never null.
    #[inline(always)]
    pub fn get() -> &'static mut Tls {
        #[cfg(target_arch = "x86_64")]
        unsafe {
            // Initial-exec: the block's offset from the thread pointer comes from the GOT.
            let p: *mut Tls;
            core::arch::asm!(
                "mov {p}, qword ptr [rip + {v}@GOTTPOFF]",
                "add {p}, qword ptr fs:[0]",
                p = out(reg) p,
                v = sym shim_tls_block,
                options(pure, readonly, nostack),
            );
            &mut *p
        }
        #[cfg(not(target_arch = "x86_64"))]
        unsafe {
            &mut *shim_tls()
        }
    }

    /// `state` after the thread's exit destructor ran: calls pass through, counted.
    pub const EXITED: *mut ThreadState = core::ptr::without_provenance_mut(1);
}
