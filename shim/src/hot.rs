//! The recording hot path: stamp, call the backend, encode one record into the calling
//! thread's own buffer. Plain stores only: no lock, no shared counter, no syscall, no
//! allocation (a full buffer is handed over in `ThreadState::swap_buffer`, off this path).
use crate::shared::{self, G};
use crate::thread::{self, enter, leave, ThreadState};
use crate::tls::{self, Tls};
use crate::{init, state};
use core::ffi::c_void;
use core::sync::atomic::Ordering::Relaxed;
use recorder::buffer::Args;
use recorder::{clock, Op};

/// Ticks now if this call is one of the sampled ones, else 0.
#[inline(always)]
fn start_timer(st: &mut ThreadState) -> u64 {
    if st.countdown != 0 {
        st.countdown -= 1;
        if st.countdown == 0 {
            st.countdown = G.get().timing_period;
            return clock::now();
        }
    }
    0
}

/// The backend time of this call: measured if sampled (`t0` != 0), else a lower bound if
/// the watchdog marked it (`slow`), else unknown. A difference that comes out negative
/// (clock reads reordered) is dropped rather than wrapped.
#[inline(always)]
pub(crate) fn backend_ticks(st: &ThreadState, t0: u64, slow: bool, end: u64) -> Option<u64> {
    let start = if t0 != 0 {
        t0
    } else if slow {
        st.slow_since.load(Relaxed)
    } else {
        return None;
    };
    end.checked_sub(start)
}

/// Whether the watchdog marked the call in progress as slow.
#[inline(always)]
pub(crate) fn marked_slow(st: &ThreadState) -> bool {
    st.slow_call.load(Relaxed) == st.calls.load(Relaxed)
}

/// Appends the record, handing the buffer over first when it is full or a second old.
#[inline(always)]
pub(crate) fn finish(st: &mut ThreadState, op: Op, ts: u64, a: &Args, bt: Option<u64>) {
    let b = unsafe { &mut *st.buf };
    let ts = clock::to_log(ts);
    let age = ts.wrapping_sub(b.first_ticks);
    if !b.has_room() || (b.n != 0 && age > shared::flush_ticks()) {
        st.swap_buffer();
    }
    unsafe { (*st.buf).push(op, ts, a, bt.map(clock::to_log)) };
}

/// The thread's state when it records, or None to take the slow path.
#[inline(always)]
fn recording(t: &mut Tls) -> Option<&'static mut ThreadState> {
    if t.busy == 0 && (t.state as usize) > 1 { Some(unsafe { &mut *t.state }) } else { None }
}

/// An allocating call (malloc, calloc, realloc, the aligned ones): stamped after the
/// backend returns, so the block's reuse sorts after any other thread's free of it.
#[inline(always)]
pub fn alloc(op: Op, a: Args, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    match state::get() {
        state::OFF => return call(),
        state::WATCHING => return watch(op, call),
        state::SAMPLING => return crate::sampled::alloc(op, a, call),
        _ => {}
    }
    record_alloc(op, a, call)
}

/// [`alloc`] for a caller that has read the state already (malloc): neither OFF,
/// WATCHING nor SAMPLING then (a window that closed since is caught by `enter`).
#[inline(always)]
pub fn record_alloc(op: Op, mut a: Args, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    let t = tls::get();
    let Some(st) = state(t) else { return call() };
    t.busy = 1;
    if !enter(st) {
        return stopped(t, st, call);
    }
    let t0 = start_timer(st);
    let p = call();
    let ts = clock::after();
    a.ptr = p as u64;
    let bt = backend_ticks(st, t0, marked_slow(st), ts);
    finish(st, op, ts, &a, bt);
    crate::stacks::after_alloc(st, ts, a.ptr, a.requested(op), bt);
    leave(st);
    t.busy = 0;
    p
}

/// A call that only releases a block (`free`, `free_sized`; `a.ptr` is the block): stamped
/// before the allocator gets the pointer.
#[inline(always)]
pub fn released(op: Op, a: Args, call: impl FnOnce()) {
    match state::get() {
        state::OFF => return call(),
        state::WATCHING => return watch(op, call),
        state::SAMPLING => return crate::sampled::released(op, a, call),
        _ => {}
    }
    record_released(op, a, call)
}

/// [`released`] for a caller that has read the state already (free).
#[inline(always)]
pub fn record_released(op: Op, a: Args, call: impl FnOnce()) {
    let t = tls::get();
    let Some(st) = state(t) else { return call() };
    t.busy = 1;
    if !enter(st) {
        stopped(t, st, || {
            call();
            core::ptr::null_mut()
        });
        return;
    }
    let ts = clock::before();
    let timed = start_timer(st) != 0;
    call();
    let slow = marked_slow(st);
    let end = if timed || slow { clock::now() } else { 0 };
    let bt = backend_ticks(st, if timed { ts } else { 0 }, slow, end);
    finish(st, op, ts, &a, bt);
    crate::stacks::after_free(st, ts, bt);
    leave(st);
    t.busy = 0;
}

/// Not recording on this thread right now: nested inside the shim, not yet initialised or
/// registered, tracing off, or after the thread's exit or the final flush. Returns true when
/// the thread is now registered and the call should be recorded.
#[cold]
#[inline(never)]
fn prepare(t: &mut Tls) -> bool {
    if t.busy != 0 {
        return false;
    }
    t.busy = 1;
    init::ensure_init();
    let ok = if !state::writing() || t.state == tls::EXITED {
        if !t.state.is_null() {
            shared::count_untraced();
        }
        false
    } else {
        t.state = crate::thread::register();
        if t.state.is_null() {
            t.state = tls::EXITED;
            shared::count_untraced();
        }
        (t.state as usize) > 1
    };
    t.busy = 0;
    ok
}

/// The calling thread's recording state, registering it first if needed.
#[inline(always)]
pub(crate) fn state(t: &mut Tls) -> Option<&'static mut ThreadState> {
    match recording(t) {
        Some(st) => Some(st),
        None if prepare(t) => Some(unsafe { &mut *t.state }),
        None => None,
    }
}

/// Between windows: the call is only marked in `in_call`, for the stall watchdog (the
/// op in the low bits, WATCHED set: the recorder never waits on such a call).
#[inline(always)]
pub fn watch<R>(op: Op, call: impl FnOnce() -> R) -> R {
    let t = tls::get();
    if (t.state as usize) <= 1 {
        return watch_first(t, call);
    }
    let st = unsafe { &mut *t.state };
    let n = st.next_call();
    st.in_call.store(thread::WATCHED | n << 6 | op as u64, Relaxed);
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    if st.halt.load(Relaxed) & crate::pace::WAKE != 0 {
        // The first call since the recorder began to doze (crate::pace).
        thread::woken(st);
    }
    let r = call();
    st.in_call.store(0, Relaxed);
    r
}

/// A thread's first call while watching: it registers (without a buffer), so that the
/// watchdog sees its calls.
#[cold]
#[inline(never)]
fn watch_first<R>(t: &mut Tls, call: impl FnOnce() -> R) -> R {
    if t.busy == 0 && t.state.is_null() {
        t.busy = 1;
        if state::get() == state::WATCHING {
            t.state = thread::register();
            if t.state.is_null() {
                t.state = tls::EXITED;
            }
        }
        t.busy = 0;
    }
    call()
}

/// The final flush has begun, or the window closed: hand this thread's buffer over and
/// forward (for good after the final flush; until the next window otherwise).
#[cold]
#[inline(never)]
pub(crate) fn stopped(t: &mut Tls, st: &mut ThreadState, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    leave(st);
    st.close();
    match state::get() {
        s if s >= state::STOPPING => {
            t.state = tls::EXITED;
            shared::count_untraced();
        }
        // A window is open, but this thread could not join it (no buffer to be had).
        state::RECORDING | state::SAMPLING => shared::count_untraced(),
        // The window closed: the call belongs to the watch.
        _ => {}
    }
    t.busy = 0;
    call()
}

/// Appends a non-call record (fork) to the calling thread's stream, if it records.
pub fn note(op: Op, value: u64) {
    let t = tls::get();
    let Some(st) = recording(t) else { return };
    t.busy = 1;
    if enter(st) {
        let a = Args { value, ..Args::default() };
        finish(st, op, clock::now(), &a, None);
        leave(st);
    } else {
        leave(st);
    }
    t.busy = 0;
}

/// An allocating call recorded in two halves around a call the caller makes itself, for
/// the C++ `operator new` glue (patch/cxx.c): an exception thrown by the allocator between
/// the halves unwinds through C frames only, whose cleanup calls [`call_abandon`].
#[repr(C)]
pub struct OpenCall {
    st: *mut ThreadState,
    t0: u64,
    open: u32,
}

/// The first half: enters the shim on this thread if it records.
#[unsafe(no_mangle)]
pub extern "C" fn shim_call_begin(c: &mut OpenCall) {
    c.open = 0;
    if matches!(state::get(), state::OFF | state::WATCHING) {
        return;
    }
    let t = tls::get();
    let Some(st) = state(t) else { return };
    t.busy = 1;
    if !enter(st) {
        stopped(t, st, core::ptr::null_mut);
        return;
    }
    c.t0 = start_timer(st);
    c.st = st;
    c.open = 1;
}

/// The second half: records the call (operator new: `align` 0 for the plain one).
#[unsafe(no_mangle)]
pub extern "C" fn shim_call_end(c: &mut OpenCall, p: *mut c_void, size: usize, align: usize) {
    if c.open == 0 {
        return;
    }
    let st = unsafe { &mut *c.st };
    let ts = clock::after();
    let (op, a) = if align > 16 {
        (Op::Memalign, Args { align: align as u64, size: size as u64, ptr: p as u64, ..Args::default() })
    } else {
        (Op::Malloc, Args { size: size as u64, ptr: p as u64, ..Args::default() })
    };
    if state::get() == state::SAMPLING {
        crate::sampled::call_end(st, op, a);
    } else {
        finish(st, op, ts, &a, backend_ticks(st, c.t0, marked_slow(st), ts));
    }
    leave(st);
    tls::get().busy = 0;
    c.open = 0;
}

/// The call threw: leave the shim without a record.
#[unsafe(no_mangle)]
pub extern "C" fn shim_call_abandon(c: &mut OpenCall) {
    if c.open != 0 {
        leave(unsafe { &mut *c.st });
        tls::get().busy = 0;
        c.open = 0;
    }
}
