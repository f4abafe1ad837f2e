//! The one dispatch on the recording state: every hooked call reads the state once, here,
//! and goes down one path (OFF: the call alone; WATCHING: hot/watch.rs; SAMPLING:
//! hot/sampled/; else hot/record.rs, which also takes UNINIT's first call and the calls
//! made while stopping). `call` is the call itself with its C rules (c_rules.rs), made by
//! the caller (exports.rs, patch/wrappers.rs).
//!
//! malloc and free have paths of their own: each path runs in a frame of its own (a tail
//! call), so that the forwarding path stays frameless and the recording path's six saved
//! registers are pushed only when it records. Also here, the C++ `operator new` glue's
//! two halves (patch/cxx.c), which dispatch the same way.
use super::entry::{backend_ticks, marked_slow, start_timer, state, stopped};
use super::{record, sampled, watch};
use crate::state as st8;
use crate::thread::tls;
use crate::thread::{append, enter, leave, ThreadState};
use core::ffi::c_void;
use recorder::buffer::Args;
use recorder::{clock, Op};

/// malloc(size), `call` serving it.
#[inline(always)]
pub fn malloc(size: usize, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    match st8::get() {
        st8::OFF => call(),
        st8::WATCHING => malloc_watched(call),
        st8::SAMPLING => malloc_sampled(size, call),
        _ => malloc_recorded(size, call),
    }
}

#[inline(never)]
fn malloc_watched(call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    watch::watch(Op::Malloc, call)
}

#[inline(never)]
fn malloc_sampled(size: usize, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    sampled::malloc(size, call)
}

#[inline(never)]
fn malloc_recorded(size: usize, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    record::alloc(Op::Malloc, Args { size: size as u64, ..Args::default() }, call)
}

/// free(p) of a block that is not NULL, `call` releasing it.
#[inline(always)]
pub fn free(p: *mut c_void, call: impl FnOnce()) {
    match st8::get() {
        st8::OFF => call(),
        st8::WATCHING => free_watched(call),
        st8::SAMPLING => free_sampled(p, call),
        _ => free_recorded(p, call),
    }
}

#[inline(never)]
fn free_watched(call: impl FnOnce()) {
    watch::watch(Op::Free, call)
}

#[inline(never)]
fn free_sampled(p: *mut c_void, call: impl FnOnce()) {
    sampled::free(p, call)
}

#[inline(never)]
fn free_recorded(p: *mut c_void, call: impl FnOnce()) {
    record::released(Op::Free, Args { ptr: p as u64, ..Args::default() }, call)
}

/// Any other allocating call (calloc, realloc, the aligned ones, a program's own
/// allocator's entry points): `a` its arguments, `call` serving it.
#[inline(always)]
pub fn alloc(op: Op, a: Args, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    match st8::get() {
        st8::OFF => call(),
        st8::WATCHING => watch::watch(op, call),
        st8::SAMPLING => sampled::alloc(op, a, call),
        _ => record::alloc(op, a, call),
    }
}

/// Any other call that only releases a block (`free_sized`, a program's own frees;
/// `a.ptr` is the block).
#[inline(always)]
pub fn released(op: Op, a: Args, call: impl FnOnce()) {
    match st8::get() {
        st8::OFF => call(),
        st8::WATCHING => watch::watch(op, call),
        st8::SAMPLING => sampled::released(op, a, call),
        _ => record::released(op, a, call),
    }
}

/// An allocating call recorded in two halves around a call the caller makes itself, for
/// the C++ `operator new` glue (patch/cxx.c): an exception thrown by the allocator between
/// the halves unwinds through C frames only, whose cleanup calls [`shim_call_abandon`].
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
    if matches!(st8::get(), st8::OFF | st8::WATCHING) {
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
    if st8::get() == st8::SAMPLING {
        sampled::call_end(st, op, a);
    } else {
        append(st, op, ts, &a, backend_ticks(st, c.t0, marked_slow(st), ts));
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
