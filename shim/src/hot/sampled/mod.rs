//! SHIM_RECORD=sample: the always-on heap profile. Every call is marked for the stall
//! watchdog and served; only these reach the log:
//! - an allocation the byte sampler takes (as SHIM_STACKS=sample takes them: mean
//!   SHIM_SAMPLE_BYTES), with its stack, and later its free;
//! - a call that stayed inside the allocator for over SHIM_STALL: a `stall` record (op,
//!   thread, time) with its stack, or its own record when it is a sampled one.
//!
//! Whether a free is one of a sampled block is asked of a lock-free set (`set.rs`), read
//! in one load for nearly every free. A realloc is recorded by what it did to sampled
//! blocks: a sampled old block and a sampled result make a `realloc`; a result sampled
//! from an unsampled old block, a `realloc` from 0 (the old block was never in the log);
//! a sampled old block replaced by an unsampled result (or freed by size 0), a `free`.
mod set;

use super::entry::{self, backend_ticks, marked_slow};
use crate::shared;
use crate::thread::tls;
use crate::thread::{append, enter, leave, ThreadState};
use core::ffi::c_void;
use recorder::buffer::Args;
use recorder::event::site_flags;
use recorder::{clock, Op};

/// malloc while sampling: [`alloc`] with nothing to carry but the size, so that the
/// common case (not sampled, not slow) keeps few values alive across the call.
#[inline(always)]
pub fn malloc(size: usize, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    let t = tls::get();
    let Some(st) = entry::state(t) else { return call() };
    t.busy = 1;
    if !enter(st) {
        return entry::stopped(t, st, call);
    }
    let p = call();
    let taken = !p.is_null() && crate::stacks::sampled(size as u64);
    let slow = marked_slow(st);
    if taken || slow {
        malloc_noted(st, size, p, taken, slow);
    }
    leave(st);
    t.busy = 0;
    p
}

#[cold]
#[inline(never)]
fn malloc_noted(st: &mut ThreadState, size: usize, p: *mut c_void, taken: bool, slow: bool) {
    after_alloc(st, Op::Malloc, Args { size: size as u64, ..Args::default() }, p, taken, slow, false);
}

/// An allocating call (malloc, calloc, realloc, the aligned ones) while sampling.
#[inline(always)]
pub fn alloc(op: Op, a: Args, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    let t = tls::get();
    let Some(st) = entry::state(t) else {
        if a.old != 0 && set::remove(a.old) {
            shared::count_untraced();
        }
        return call();
    };
    t.busy = 1;
    if !enter(st) {
        return entry::stopped(t, st, call);
    }
    // The old block leaves the set before the allocator may hand its address out again.
    let old_sampled = a.old != 0 && set::remove(a.old);
    let p = call();
    let slow = marked_slow(st);
    let taken = !p.is_null() && crate::stacks::sampled(a.requested(op));
    if taken || slow || old_sampled {
        after_alloc(st, op, a, p, taken, slow, old_sampled);
    }
    leave(st);
    t.busy = 0;
    p
}

#[cold]
#[inline(never)]
fn after_alloc(
    st: &mut ThreadState,
    op: Op,
    mut a: Args,
    p: *mut c_void,
    taken: bool,
    slow: bool,
    old_sampled: bool,
) {
    let ts = clock::after();
    let bt = if slow { backend_ticks(st, 0, true, ts) } else { None };
    let slow = crate::stacks::is_slow(bt);
    let resized = matches!(op, Op::Realloc | Op::Reallocarray);
    // A resize to 0 bytes frees the old block, so a null result is no failure then.
    let failed = p.is_null() && a.requested(op) != 0;
    if old_sampled && failed {
        // A failed realloc: the old block lives on.
        set::insert(a.old);
    }
    let taken = taken && {
        let ok = set::insert(p as u64);
        if !ok {
            shared::count_untraced();
        }
        ok
    };
    a.ptr = p as u64;
    let flag = if slow { site_flags::SLOW } else { 0 };
    if taken {
        if resized && !old_sampled {
            a.old = 0;
        }
        append(st, op, ts, &a, bt);
        crate::stacks::take(st, ts, site_flags::SAMPLED | flag);
        return;
    }
    if old_sampled && !failed {
        // The sampled block is gone, its replacement unsampled.
        append(st, Op::Free, ts, &Args { ptr: a.old, ..Args::default() }, bt);
        if slow {
            crate::stacks::take(st, ts, flag);
        }
    } else if slow {
        stall(st, op, ts, bt);
    }
}

/// free while sampling: [`released`] with only the pointer to carry.
#[inline(always)]
pub fn free(ptr: *mut c_void, call: impl FnOnce()) {
    release(Op::Free, ptr as u64, || Args { ptr: ptr as u64, ..Args::default() }, call)
}

/// A call that only releases a block (`free`, `free_sized`; `a.ptr` is the block).
#[inline(always)]
pub fn released(op: Op, a: Args, call: impl FnOnce()) {
    release(op, a.ptr, || a, call)
}

/// Both: `args` makes the record's arguments, needed only when the block was sampled.
#[inline(always)]
fn release(op: Op, ptr: u64, args: impl FnOnce() -> Args, call: impl FnOnce()) {
    let t = tls::get();
    let Some(st) = entry::state(t) else { return unrecorded(ptr, call) };
    t.busy = 1;
    if !enter(st) {
        entry::stopped(t, st, || {
            call();
            core::ptr::null_mut()
        });
        return;
    }
    // Out of the set before the allocator has the address to give again.
    let sampled = set::remove(ptr);
    let ts = if sampled { clock::before() } else { 0 };
    call();
    let slow = marked_slow(st);
    if sampled || slow {
        after_free(st, op, args(), ts, sampled, slow);
    }
    leave(st);
    t.busy = 0;
}

#[cold]
#[inline(never)]
fn after_free(st: &mut ThreadState, op: Op, a: Args, ts: u64, sampled: bool, slow: bool) {
    let end = clock::now();
    let bt = if slow { backend_ticks(st, 0, true, end) } else { None };
    let slow = crate::stacks::is_slow(bt);
    if sampled {
        append(st, op, ts, &a, bt);
        if slow {
            crate::stacks::take(st, ts, site_flags::SLOW);
        }
    } else if slow {
        stall(st, op, end, bt);
    }
}

/// A free this thread cannot record (nested inside the shim, or after its exit): a sampled
/// block still leaves the set, lest its address, made again, be taken for it; the lost
/// free is counted.
#[cold]
#[inline(never)]
fn unrecorded(ptr: u64, call: impl FnOnce()) {
    if set::remove(ptr) {
        shared::count_untraced();
    }
    call()
}

/// A slow call on a block that is not sampled: a stall record and the stack.
fn stall(st: &mut ThreadState, op: Op, ts: u64, bt: Option<u64>) {
    let a = Args { size: op as u64, value: st.tid as u64, ..Args::default() };
    append(st, Op::Stall, ts, &a, bt);
    crate::stacks::take(st, ts, site_flags::SLOW);
}

/// The C++ operator new glue's second half while sampling (see `dispatch::shim_call_end`).
pub fn call_end(st: &mut ThreadState, op: Op, a: Args) {
    let slow = marked_slow(st);
    let taken = a.ptr != 0 && crate::stacks::sampled(a.size);
    if taken || slow {
        after_alloc(st, op, a, a.ptr as *mut c_void, taken, slow, false);
    }
}
