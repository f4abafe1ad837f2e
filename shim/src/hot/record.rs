//! The recording path: stamp, call the backend, encode one record into the calling
//! thread's own buffer. Plain stores only: no lock, no shared counter, no syscall, no
//! allocation (a full buffer is handed over in `ThreadState::swap_buffer`, off this path).
use super::entry::{backend_ticks, marked_slow, recording, start_timer, state, stopped};
use crate::thread::tls;
use crate::thread::{append, enter, leave};
use core::ffi::c_void;
use recorder::buffer::Args;
use recorder::{clock, Op};

/// An allocating call (malloc, calloc, realloc, the aligned ones): stamped after the
/// backend returns, so the block's reuse sorts after any other thread's free of it. The
/// state was read already (hot/dispatch.rs): a window that closed since is caught by `enter`.
#[inline(always)]
pub fn alloc(op: Op, mut a: Args, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
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
    append(st, op, ts, &a, bt);
    crate::stacks::after_alloc(st, ts, a.ptr, a.requested(op), bt);
    leave(st);
    t.busy = 0;
    p
}

/// A call that only releases a block (`free`, `free_sized`; `a.ptr` is the block): stamped
/// before the allocator gets the pointer.
#[inline(always)]
pub fn released(op: Op, a: Args, call: impl FnOnce()) {
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
    append(st, op, ts, &a, bt);
    crate::stacks::after_free(st, ts, bt);
    leave(st);
    t.busy = 0;
}

/// Appends a non-call record (fork) to the calling thread's stream, if it records.
pub fn note(op: Op, value: u64) {
    let t = tls::get();
    let Some(st) = recording(t) else { return };
    t.busy = 1;
    if enter(st) {
        let a = Args { value, ..Args::default() };
        append(st, op, clock::now(), &a, None);
        leave(st);
    } else {
        leave(st);
    }
    t.busy = 0;
}
