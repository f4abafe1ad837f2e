//! What a patched entry point runs: one wrapper per [`Kind`], in [`SLOTS`] copies so that
//! each patched function has its own (the copy's number picks its original's trampoline).
//!
//! Recorded (the default for a program's own allocator): the call is recorded around the
//! original, through its trampoline. Switched: the call is served by the shim's backend with
//! the entry point's semantics (the C rules of c_rules.rs, as exports.rs serves the standard
//! ones), except that a block its own allocator made (see `owner`) goes back to it. Either
//! way the call goes through the one dispatch on the recording state (hot/dispatch.rs).
#![allow(clippy::missing_safety_doc)]
use super::entries::{Kind, KINDS};
use super::owner;
use crate::c_rules::{self as c, aligned, oom};
use crate::hot::dispatch;
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use recorder::buffer::Args;
use recorder::Op;
use shim_backend::emulate::{self as emu, jemalloc::WriteCb, mimalloc::OutputFun};
use shim_backend::{self as be, jemalloc_api as je, Backend};

pub const SLOTS: usize = 8;

static ORIGINAL: [[AtomicUsize; SLOTS]; KINDS] = [const { [const { AtomicUsize::new(0) }; SLOTS] }; KINDS];
static SWITCHED: AtomicBool = AtomicBool::new(false);

/// The trampoline that calls the original of the entry point in `slot` of `kind`.
pub fn set_original(kind: Kind, slot: usize, addr: usize) {
    ORIGINAL[kind as usize][slot].store(addr, Relaxed);
}

/// From now on the entry points are served by the backend.
pub fn set_switched() {
    SWITCHED.store(true, Relaxed);
}

#[inline(always)]
pub(super) fn switched() -> bool {
    SWITCHED.load(Relaxed)
}

#[inline(always)]
pub(super) fn original(kind: Kind, slot: usize) -> usize {
    ORIGINAL[kind as usize][slot].load(Relaxed)
}

/// Calls the original of this wrapper's entry point.
macro_rules! orig {
    ($kind:ident, $s:ident, ($($t:ty),*) -> $r:ty, ($($a:expr),*)) => {{
        let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { core::mem::transmute(original(Kind::$kind, $s)) };
        unsafe { f($($a),*) }
    }};
}

#[inline(always)]
pub(super) fn args(size: usize) -> Args {
    Args { size: size as u64, ..Args::default() }
}

#[inline(always)]
fn is_je() -> bool {
    be::selected() == Backend::Jemalloc
}

/// The record of an allocation aligned to `align` (0 or up to 16: as plain malloc).
#[inline(always)]
pub(super) fn aligned_record(align: usize, size: usize) -> (Op, Args) {
    if align > 16 {
        (Op::Memalign, Args { align: align as u64, size: size as u64, ..Args::default() })
    } else {
        (Op::Malloc, args(size))
    }
}

/// The alignment a jemalloc `flags` word asks for (0: none).
#[inline(always)]
fn flags_align(flags: c_int) -> usize {
    let lg = flags & 0x3f;
    if lg == 0 {
        0
    } else {
        1usize << lg
    }
}

const MALLOCX_ZERO: c_int = 0x40;

/// An old block resized by its own allocator: the result stays that allocator's.
#[inline(always)]
fn resized_old(p: *mut c_void, q: *mut c_void) -> *mut c_void {
    if q != p {
        owner::forget(p);
        owner::adopt(q);
    }
    q
}

#[inline(always)]
fn switched_old(p: *mut c_void) -> bool {
    switched() && !p.is_null() && owner::is_old(p)
}

/// `size` bytes aligned to `align` from the backend, zeroed if asked.
#[inline(always)]
pub(super) unsafe fn backend_aligned(align: usize, size: usize, zero: bool) -> *mut c_void {
    unsafe {
        if align <= 8 {
            return oom(if zero { be::calloc(1, size) } else { be::malloc(size) });
        }
        let q = aligned(align, size);
        if zero && !q.is_null() {
            core::ptr::write_bytes(q as *mut u8, 0, size);
        }
        q
    }
}

/// realloc to an alignment the backend's realloc does not keep: a new block, the bytes
/// copied, the old one freed. `zero_from`: zero the new bytes past this offset.
pub(super) unsafe fn backend_realloc_aligned(
    p: *mut c_void,
    size: usize,
    align: usize,
    zero: bool,
) -> *mut c_void {
    unsafe {
        if p.is_null() {
            return backend_aligned(align, size, zero);
        }
        let old = be::usable_size(p);
        let q = if align <= 8 { oom(be::realloc(p, size.max(1))) } else { aligned(align, size.max(1)) };
        if q.is_null() {
            return q;
        }
        if align > 8 {
            core::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, old.min(size));
            be::free(p);
        }
        if zero && size > old {
            core::ptr::write_bytes((q as *mut u8).add(old), 0, size - old);
        }
        q
    }
}

// ---- allocations ----

extern "C" fn alloc1<const S: usize>(n: usize) -> *mut c_void {
    if switched() {
        return dispatch::malloc(n, move || unsafe { c::malloc(n) });
    }
    dispatch::alloc(Op::Malloc, args(n), || orig!(Alloc1, S, (usize) -> *mut c_void, (n)))
}

extern "C" fn zalloc1<const S: usize>(n: usize) -> *mut c_void {
    let a = Args { count: 1, size: n as u64, ..Args::default() };
    if switched() {
        return dispatch::alloc(Op::Calloc, a, || unsafe { c::calloc(1, n) });
    }
    dispatch::alloc(Op::Calloc, a, || orig!(Zalloc1, S, (usize) -> *mut c_void, (n)))
}

extern "C" fn calloc2<const S: usize>(c: usize, n: usize) -> *mut c_void {
    let a = Args { count: c as u64, size: n as u64, ..Args::default() };
    if switched() {
        return dispatch::alloc(Op::Calloc, a, || unsafe { c::calloc(c, n) });
    }
    dispatch::alloc(Op::Calloc, a, || orig!(Calloc2, S, (usize, usize) -> *mut c_void, (c, n)))
}

extern "C" fn mallocn2<const S: usize>(c: usize, n: usize) -> *mut c_void {
    let a = args(c.saturating_mul(n));
    if switched() {
        return dispatch::alloc(Op::Malloc, a, || unsafe { c::malloc_n(c, n) });
    }
    dispatch::alloc(Op::Malloc, a, || orig!(Mallocn2, S, (usize, usize) -> *mut c_void, (c, n)))
}

extern "C" fn posix_memalign3<const S: usize>(out: *mut *mut c_void, al: usize, n: usize) -> c_int {
    let a = Args { align: al as u64, size: n as u64, ..Args::default() };
    if switched() {
        return unsafe {
            c::posix_memalign(out, al, || dispatch::alloc(Op::PosixMemalign, a, || c::aligned(al, n)))
        };
    }
    let mut rc = 0;
    let mut q: *mut c_void = core::ptr::null_mut();
    dispatch::alloc(Op::PosixMemalign, a, || {
        rc = orig!(PosixMemalign3, S, (*mut *mut c_void, usize, usize) -> c_int, (&mut q, al, n));
        if rc == 0 {
            q
        } else {
            core::ptr::null_mut()
        }
    });
    if rc == 0 {
        unsafe { *out = q };
    }
    rc
}

macro_rules! aligned_std {
    ($name:ident, $kind:ident, $op:ident) => {
        extern "C" fn $name<const S: usize>(al: usize, n: usize) -> *mut c_void {
            let a = Args { align: al as u64, size: n as u64, ..Args::default() };
            if switched() {
                return dispatch::alloc(Op::$op, a, || unsafe { c::memalign(al, n) });
            }
            dispatch::alloc(Op::$op, a, || orig!($kind, S, (usize, usize) -> *mut c_void, (al, n)))
        }
    };
}
aligned_std!(aligned_alloc2, AlignedAlloc2, AlignedAlloc);
aligned_std!(memalign2, Memalign2, Memalign);

extern "C" fn valloc1<const S: usize>(n: usize) -> *mut c_void {
    if switched() {
        return dispatch::alloc(Op::Valloc, args(n), || unsafe { c::valloc(n) });
    }
    dispatch::alloc(Op::Valloc, args(n), || orig!(Valloc1, S, (usize) -> *mut c_void, (n)))
}

extern "C" fn pvalloc1<const S: usize>(n: usize) -> *mut c_void {
    if switched() {
        return dispatch::alloc(Op::Pvalloc, args(n), || unsafe { c::pvalloc(n) });
    }
    dispatch::alloc(Op::Pvalloc, args(n), || orig!(Pvalloc1, S, (usize) -> *mut c_void, (n)))
}

extern "C" fn alloc_aligned2<const S: usize>(n: usize, al: usize) -> *mut c_void {
    let (op, a) = aligned_record(al, n);
    if switched() {
        if !al.is_power_of_two() {
            return core::ptr::null_mut();
        }
        return dispatch::alloc(op, a, || unsafe { backend_aligned(al, n, false) });
    }
    dispatch::alloc(op, a, || orig!(AllocAligned2, S, (usize, usize) -> *mut c_void, (n, al)))
}

extern "C" fn zalloc_aligned2<const S: usize>(n: usize, al: usize) -> *mut c_void {
    let (op, a) = if al > 16 { aligned_record(al, n) } else { (Op::Calloc, Args { count: 1, ..args(n) }) };
    if switched() {
        if !al.is_power_of_two() {
            return core::ptr::null_mut();
        }
        return dispatch::alloc(op, a, || unsafe { backend_aligned(al, n, true) });
    }
    dispatch::alloc(op, a, || orig!(ZallocAligned2, S, (usize, usize) -> *mut c_void, (n, al)))
}

extern "C" fn calloc_aligned3<const S: usize>(c: usize, n: usize, al: usize) -> *mut c_void {
    let total = c.saturating_mul(n);
    let (op, a) =
        if al > 16 { aligned_record(al, total) } else { (Op::Calloc, Args { count: c as u64, ..args(n) }) };
    if switched() {
        if !al.is_power_of_two() || c.checked_mul(n).is_none() {
            return core::ptr::null_mut();
        }
        return dispatch::alloc(op, a, || unsafe { backend_aligned(al, total, true) });
    }
    dispatch::alloc(op, a, || orig!(CallocAligned3, S, (usize, usize, usize) -> *mut c_void, (c, n, al)))
}

extern "C" fn mallocx2<const S: usize>(n: usize, flags: c_int) -> *mut c_void {
    let al = flags_align(flags);
    let zero = flags & MALLOCX_ZERO != 0;
    let (op, a) = if al > 0 {
        (Op::Memalign, Args { align: al as u64, ..args(n) })
    } else if zero {
        (Op::Calloc, Args { count: 1, ..args(n) })
    } else {
        (Op::Malloc, args(n))
    };
    if switched() {
        return dispatch::alloc(op, a, || unsafe {
            if is_je() {
                je::mallocx(n, flags)
            } else {
                backend_aligned(al, n, zero)
            }
        });
    }
    dispatch::alloc(op, a, || orig!(Mallocx2, S, (usize, c_int) -> *mut c_void, (n, flags)))
}

extern "C" fn cxx_new_nothrow2<const S: usize>(n: usize, nt: *const c_void) -> *mut c_void {
    if switched() {
        return dispatch::alloc(Op::Malloc, args(n), || unsafe { be::malloc(n) });
    }
    dispatch::alloc(
        Op::Malloc,
        args(n),
        || orig!(CxxNewNothrow2, S, (usize, *const c_void) -> *mut c_void, (n, nt)),
    )
}

extern "C" fn cxx_new_aligned_nothrow3<const S: usize>(
    n: usize,
    al: usize,
    nt: *const c_void,
) -> *mut c_void {
    let (op, a) = aligned_record(al, n);
    if switched() {
        return dispatch::alloc(op, a, || unsafe { backend_aligned(al, n, false) });
    }
    dispatch::alloc(
        op,
        a,
        || orig!(CxxNewAlignedNothrow3, S, (usize, usize, *const c_void) -> *mut c_void, (n, al, nt)),
    )
}

/// Throwing operator new, switched: the C glue (cxx.c) throws when this returns NULL.
#[unsafe(no_mangle)]
pub extern "C" fn shim_cxx_new_switched(n: usize, al: usize) -> *mut c_void {
    let (op, a) = aligned_record(al, n);
    dispatch::alloc(op, a, || unsafe { backend_aligned(al, n, false) })
}

/// Whether the entry points are switched, for the C glue.
#[unsafe(no_mangle)]
pub extern "C" fn shim_cxx_switched() -> c_int {
    switched() as c_int
}

/// The original of a throwing operator new, for the C glue: `aligned` 0 for (size), 1 for
/// (size, align).
#[unsafe(no_mangle)]
pub extern "C" fn shim_cxx_original(aligned: c_int, slot: c_int) -> usize {
    let kind = if aligned != 0 { Kind::CxxNewAligned2 } else { Kind::CxxNew1 };
    original(kind, (slot as usize).min(SLOTS - 1))
}

// ---- resizing ----

/// A call that resizes `p`: an old block (switched) is resized by its own allocator (the
/// original) and stays its; otherwise the backend serves it when switched, the original
/// when recorded.
#[inline(always)]
pub(super) fn resize(
    op: Op,
    p: *mut c_void,
    a: Args,
    original: impl FnOnce() -> *mut c_void,
    backend: impl FnOnce() -> *mut c_void,
) -> *mut c_void {
    if switched_old(p) {
        return dispatch::alloc(op, a, || resized_old(p, original()));
    }
    if switched() {
        emu::mimalloc::heap_forget(p);
        return dispatch::alloc(op, a, backend);
    }
    dispatch::alloc(op, a, original)
}

extern "C" fn realloc2<const S: usize>(p: *mut c_void, n: usize) -> *mut c_void {
    let a = Args { old: p as u64, ..args(n) };
    resize(
        Op::Realloc,
        p,
        a,
        || orig!(Realloc2, S, (*mut c_void, usize) -> *mut c_void, (p, n)),
        || unsafe { c::realloc(p, n) },
    )
}

extern "C" fn reallocf2<const S: usize>(p: *mut c_void, n: usize) -> *mut c_void {
    let a = Args { old: p as u64, ..args(n) };
    resize(
        Op::Realloc,
        p,
        a,
        || orig!(Reallocf2, S, (*mut c_void, usize) -> *mut c_void, (p, n)),
        || unsafe {
            let q = c::realloc(p, n);
            if q.is_null() && !p.is_null() && n != 0 {
                be::free(p);
            }
            q
        },
    )
}

extern "C" fn expand2<const S: usize>(p: *mut c_void, n: usize) -> *mut c_void {
    let a = Args { old: p as u64, ..args(n) };
    if switched() && !switched_old(p) {
        return dispatch::alloc(Op::Realloc, a, || unsafe {
            if !p.is_null() && be::usable_size(p) >= n {
                p
            } else {
                core::ptr::null_mut()
            }
        });
    }
    dispatch::alloc(Op::Realloc, a, || orig!(Expand2, S, (*mut c_void, usize) -> *mut c_void, (p, n)))
}

extern "C" fn reallocarray3<const S: usize>(p: *mut c_void, c: usize, n: usize) -> *mut c_void {
    let a = Args { old: p as u64, count: c as u64, ..args(n) };
    let original = || orig!(Reallocarray3, S, (*mut c_void, usize, usize) -> *mut c_void, (p, c, n));
    resize(Op::Reallocarray, p, a, original, || unsafe { c::reallocarray(p, c, n) })
}

extern "C" fn realloc_aligned3<const S: usize>(p: *mut c_void, n: usize, al: usize) -> *mut c_void {
    let a = Args { old: p as u64, ..args(n) };
    let original = || orig!(ReallocAligned3, S, (*mut c_void, usize, usize) -> *mut c_void, (p, n, al));
    resize(Op::Realloc, p, a, original, || unsafe { backend_realloc_aligned(p, n, al, false) })
}

extern "C" fn rallocx3<const S: usize>(p: *mut c_void, n: usize, flags: c_int) -> *mut c_void {
    let a = Args { old: p as u64, ..args(n) };
    let original = || orig!(Rallocx3, S, (*mut c_void, usize, c_int) -> *mut c_void, (p, n, flags));
    resize(Op::Realloc, p, a, original, || unsafe {
        if is_je() {
            je::rallocx(p, n, flags)
        } else {
            backend_realloc_aligned(p, n, flags_align(flags), flags & MALLOCX_ZERO != 0)
        }
    })
}

/// xallocx resizes in place or not at all: recorded as a realloc that returns the same
/// block, or fails (the block stays as it was) when it could not reach `n`.
extern "C" fn xallocx4<const S: usize>(p: *mut c_void, n: usize, extra: usize, flags: c_int) -> usize {
    let a = Args { old: p as u64, ..args(n) };
    let mut r = 0usize;
    dispatch::alloc(Op::Realloc, a, || {
        r = if switched() && !switched_old(p) {
            unsafe {
                if is_je() {
                    je::xallocx(p, n, extra, flags)
                } else {
                    be::usable_size(p)
                }
            }
        } else {
            orig!(Xallocx4, S, (*mut c_void, usize, usize, c_int) -> usize, (p, n, extra, flags))
        };
        if r >= n {
            p
        } else {
            core::ptr::null_mut()
        }
    });
    r
}

// ---- frees ----

/// A free of `p` recorded as `op` (`a`); `call` is the original, used for an old block.
#[inline(always)]
pub(super) fn release(p: *mut c_void, op: Op, a: Args, call: impl FnOnce()) {
    if p.is_null() {
        return;
    }
    if !switched() {
        return dispatch::released(op, a, call);
    }
    if owner::is_old(p) {
        owner::forget(p);
        return dispatch::released(op, a, call);
    }
    emu::mimalloc::heap_forget(p);
    dispatch::released(op, a, || unsafe { be::free(p) })
}

#[inline(always)]
pub(super) fn freed(p: *mut c_void) -> Args {
    Args { ptr: p as u64, ..Args::default() }
}

#[inline(always)]
fn freed_sized(p: *mut c_void, n: usize) -> Args {
    Args { ptr: p as u64, size: n as u64, ..Args::default() }
}

extern "C" fn free1<const S: usize>(p: *mut c_void) {
    release(p, Op::Free, freed(p), || orig!(Free1, S, (*mut c_void) -> (), (p)))
}

extern "C" fn free2<const S: usize>(p: *mut c_void, x: usize) {
    release(p, Op::Free, freed(p), || orig!(Free2, S, (*mut c_void, usize) -> (), (p, x)))
}

extern "C" fn free3<const S: usize>(p: *mut c_void, x: usize, y: usize) {
    release(p, Op::Free, freed(p), || orig!(Free3, S, (*mut c_void, usize, usize) -> (), (p, x, y)))
}

extern "C" fn free_sized2<const S: usize>(p: *mut c_void, n: usize) {
    release(p, Op::FreeSized, freed_sized(p, n), || orig!(FreeSized2, S, (*mut c_void, usize) -> (), (p, n)))
}

extern "C" fn free_sized3<const S: usize>(p: *mut c_void, n: usize, x: usize) {
    release(
        p,
        Op::FreeSized,
        freed_sized(p, n),
        || orig!(FreeSized3, S, (*mut c_void, usize, usize) -> (), (p, n, x)),
    )
}

extern "C" fn free_aligned_sized3<const S: usize>(p: *mut c_void, al: usize, n: usize) {
    release(
        p,
        Op::FreeSized,
        freed_sized(p, n),
        || orig!(FreeAlignedSized3, S, (*mut c_void, usize, usize) -> (), (p, al, n)),
    )
}

// ---- queries and controls (not recorded) ----

extern "C" fn usable1<const S: usize>(p: *mut c_void) -> usize {
    if switched() && !switched_old(p) {
        return if p.is_null() { 0 } else { unsafe { be::usable_size(p) } };
    }
    orig!(Usable1, S, (*mut c_void) -> usize, (p))
}

extern "C" fn sallocx2<const S: usize>(p: *mut c_void, flags: c_int) -> usize {
    if switched() && !switched_old(p) {
        return unsafe {
            if is_je() {
                je::sallocx(p, flags)
            } else {
                be::usable_size(p)
            }
        };
    }
    orig!(Sallocx2, S, (*mut c_void, c_int) -> usize, (p, flags))
}

extern "C" fn good_size1<const S: usize>(n: usize) -> usize {
    if switched() {
        return be::size_class(be::selected(), n);
    }
    orig!(GoodSize1, S, (usize) -> usize, (n))
}

extern "C" fn nallocx2<const S: usize>(n: usize, flags: c_int) -> usize {
    if switched() {
        if is_je() {
            return je::nallocx(n, flags);
        }
        let al = flags_align(flags).max(1);
        return be::size_class(be::selected(), n.max(al)).next_multiple_of(al);
    }
    orig!(Nallocx2, S, (usize, c_int) -> usize, (n, flags))
}

// ---- introspection (not recorded): when switched, the serving backend answers, in the
// program's allocator's terms (the shim's jemalloc answers jemalloc's calls itself; the
// other backends through shim_backend::emulate).

extern "C" fn mallctl5<const S: usize>(
    name: *const c_char,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
) -> c_int {
    if switched() {
        return unsafe {
            if is_je() {
                je::mallctl(name, oldp, oldlenp, newp, newlen)
            } else {
                emu::jemalloc::mallctl(be::selected(), name, oldp, oldlenp, newp, newlen)
            }
        };
    }
    orig!(Mallctl5, S, (*const c_char, *mut c_void, *mut usize, *mut c_void, usize) -> c_int, (name, oldp, oldlenp, newp, newlen))
}

extern "C" fn nametomib3<const S: usize>(
    name: *const c_char,
    mibp: *mut usize,
    miblenp: *mut usize,
) -> c_int {
    if switched() {
        return unsafe {
            if is_je() {
                je::mallctlnametomib(name, mibp, miblenp)
            } else {
                emu::jemalloc::nametomib(be::selected(), name, mibp, miblenp)
            }
        };
    }
    orig!(Nametomib3, S, (*const c_char, *mut usize, *mut usize) -> c_int, (name, mibp, miblenp))
}

extern "C" fn bymib6<const S: usize>(
    mib: *const usize,
    miblen: usize,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
) -> c_int {
    if switched() {
        return unsafe {
            if is_je() {
                je::mallctlbymib(mib, miblen, oldp, oldlenp, newp, newlen)
            } else {
                emu::jemalloc::bymib(be::selected(), mib, miblen, oldp, oldlenp, newp, newlen)
            }
        };
    }
    orig!(Bymib6, S, (*const usize, usize, *mut c_void, *mut usize, *mut c_void, usize) -> c_int, (mib, miblen, oldp, oldlenp, newp, newlen))
}

extern "C" fn stats_print3<const S: usize>(cb: WriteCb, arg: *mut c_void, opts: *const c_char) {
    if switched() {
        return unsafe {
            if is_je() {
                je::malloc_stats_print(cb, arg, opts)
            } else {
                emu::jemalloc::stats_print(be::selected(), cb, arg, opts)
            }
        };
    }
    orig!(StatsPrint3, S, (WriteCb, *mut c_void, *const c_char) -> (), (cb, arg, opts))
}

extern "C" fn tc_get_property2<const S: usize>(name: *const c_char, value: *mut usize) -> c_int {
    if switched() {
        return unsafe { emu::tcmalloc::get_numeric_property(be::selected(), name, value) };
    }
    orig!(TcGetProperty2, S, (*const c_char, *mut usize) -> c_int, (name, value))
}

extern "C" fn tc_set_property2<const S: usize>(name: *const c_char, value: usize) -> c_int {
    if switched() {
        return unsafe { emu::tcmalloc::set_numeric_property(be::selected(), name, value) };
    }
    orig!(TcSetProperty2, S, (*const c_char, usize) -> c_int, (name, value))
}

extern "C" fn tc_get_stats2<const S: usize>(buf: *mut c_char, len: c_int) {
    if switched() {
        return unsafe { emu::tcmalloc::get_stats(be::selected(), buf, len) };
    }
    orig!(TcGetStats2, S, (*mut c_char, c_int) -> (), (buf, len))
}

extern "C" fn tc_release_to_system1<const S: usize>(n: usize) {
    if switched() {
        return emu::tcmalloc::release_free_memory(be::selected());
    }
    orig!(TcReleaseToSystem1, S, (usize) -> (), (n))
}

extern "C" fn mi_process_info8<const S: usize>(
    elapsed: *mut usize,
    user: *mut usize,
    system: *mut usize,
    rss: *mut usize,
    peak_rss: *mut usize,
    commit: *mut usize,
    peak_commit: *mut usize,
    faults: *mut usize,
) {
    if switched() {
        return unsafe {
            emu::mimalloc::process_info_c(
                be::selected(),
                elapsed,
                user,
                system,
                rss,
                peak_rss,
                commit,
                peak_commit,
                faults,
            )
        };
    }
    orig!(MiProcessInfo8, S, (*mut usize, *mut usize, *mut usize, *mut usize, *mut usize, *mut usize, *mut usize, *mut usize) -> (), (elapsed, user, system, rss, peak_rss, commit, peak_commit, faults))
}

extern "C" fn mi_stats_print_out2<const S: usize>(out: OutputFun, arg: *mut c_void) {
    if switched() {
        return unsafe { emu::mimalloc::stats_print_out(be::selected(), out, arg) };
    }
    orig!(MiStatsPrintOut2, S, (OutputFun, *mut c_void) -> (), (out, arg))
}

/// mi_stats_print(out): `out` is an output function (mimalloc's old signature takes it as
/// `void*`).
extern "C" fn mi_stats_print1<const S: usize>(out: OutputFun) {
    if switched() {
        return unsafe { emu::mimalloc::stats_print_out(be::selected(), out, core::ptr::null_mut()) };
    }
    orig!(MiStatsPrint1, S, (OutputFun) -> (), (out))
}

extern "C" fn mi_collect1<const S: usize>(force: bool) {
    if switched() {
        return emu::mimalloc::collect(be::selected(), force);
    }
    orig!(MiCollect1, S, (bool) -> (), (force))
}

extern "C" fn defrag_hint1<const S: usize>(p: *mut c_void) -> c_int {
    if switched() {
        return emu::jemalloc::defrag_hint(be::selected(), p);
    }
    orig!(DefragHint1, S, (*mut c_void) -> c_int, (p))
}

/// The introspection calls that take nothing and return nothing: the backend's own action
/// when switched, the original otherwise.
macro_rules! action0 {
    ($name:ident, $kind:ident, $action:expr) => {
        extern "C" fn $name<const S: usize>() {
            if switched() {
                let act: fn(Backend) = $action;
                return act(be::selected());
            }
            orig!($kind, S, () -> (), ())
        }
    };
}
action0!(tc_release0, TcRelease0, emu::tcmalloc::release_free_memory);
action0!(tc_mark_idle0, TcMarkIdle0, emu::tcmalloc::mark_thread_idle);
action0!(tc_malloc_stats0, TcMallocStats0, emu::tcmalloc::malloc_stats);
action0!(mi_stats_reset0, MiStatsReset0, emu::mimalloc::stats_reset);
action0!(mi_stats_merge0, MiStatsMerge0, emu::mimalloc::stats_merge);

unsafe extern "C" {
    /// The C glue's throwing `operator new` wrappers, one per slot (cxx.c).
    static shim_cxx_new_glue: [usize; SLOTS];
    static shim_cxx_new_aligned_glue: [usize; SLOTS];
}

/// The addresses of a wrapper's [`SLOTS`] copies, slot by slot (also for mozjemalloc.rs and
/// mi_api.rs).
macro_rules! slots {
    ($f:ident) => {
        [
            $f::<0> as *const () as usize,
            $f::<1> as *const () as usize,
            $f::<2> as *const () as usize,
            $f::<3> as *const () as usize,
            $f::<4> as *const () as usize,
            $f::<5> as *const () as usize,
            $f::<6> as *const () as usize,
            $f::<7> as *const () as usize,
        ]
    };
}
pub(super) use slots;

/// The wrapper of `kind` in `slot` (`slot` < [`SLOTS`]).
pub fn address(kind: Kind, slot: usize) -> usize {
    use Kind::*;
    let all: [usize; SLOTS] = match kind {
        Alloc1 => slots!(alloc1),
        Zalloc1 => slots!(zalloc1),
        Calloc2 => slots!(calloc2),
        Mallocn2 => slots!(mallocn2),
        Realloc2 => slots!(realloc2),
        Reallocf2 => slots!(reallocf2),
        Expand2 => slots!(expand2),
        Reallocarray3 => slots!(reallocarray3),
        Free1 => slots!(free1),
        Free2 => slots!(free2),
        Free3 => slots!(free3),
        FreeSized2 => slots!(free_sized2),
        FreeSized3 => slots!(free_sized3),
        FreeAlignedSized3 => slots!(free_aligned_sized3),
        PosixMemalign3 => slots!(posix_memalign3),
        AlignedAlloc2 => slots!(aligned_alloc2),
        Memalign2 => slots!(memalign2),
        Valloc1 => slots!(valloc1),
        Pvalloc1 => slots!(pvalloc1),
        Usable1 => slots!(usable1),
        GoodSize1 => slots!(good_size1),
        AllocAligned2 => slots!(alloc_aligned2),
        ZallocAligned2 => slots!(zalloc_aligned2),
        CallocAligned3 => slots!(calloc_aligned3),
        ReallocAligned3 => slots!(realloc_aligned3),
        Mallocx2 => slots!(mallocx2),
        Rallocx3 => slots!(rallocx3),
        Xallocx4 => slots!(xallocx4),
        Sallocx2 => slots!(sallocx2),
        Nallocx2 => slots!(nallocx2),
        Mallctl5 => slots!(mallctl5),
        Nametomib3 => slots!(nametomib3),
        Bymib6 => slots!(bymib6),
        CxxNew1 => unsafe { shim_cxx_new_glue },
        CxxNewNothrow2 => slots!(cxx_new_nothrow2),
        CxxNewAligned2 => unsafe { shim_cxx_new_aligned_glue },
        CxxNewAlignedNothrow3 => slots!(cxx_new_aligned_nothrow3),
        StatsPrint3 => slots!(stats_print3),
        TcGetProperty2 => slots!(tc_get_property2),
        TcSetProperty2 => slots!(tc_set_property2),
        TcGetStats2 => slots!(tc_get_stats2),
        TcRelease0 => slots!(tc_release0),
        TcReleaseToSystem1 => slots!(tc_release_to_system1),
        TcMarkIdle0 => slots!(tc_mark_idle0),
        TcMallocStats0 => slots!(tc_malloc_stats0),
        MiProcessInfo8 => slots!(mi_process_info8),
        MiStatsPrintOut2 => slots!(mi_stats_print_out2),
        MiStatsPrint1 => slots!(mi_stats_print1),
        MiStatsReset0 => slots!(mi_stats_reset0),
        MiStatsMerge0 => slots!(mi_stats_merge0),
        MiCollect1 => slots!(mi_collect1),
        DefragHint1 => slots!(defrag_hint1),
        // mozjemalloc's own calls and mimalloc's heaps: their wrappers are in mozjemalloc.rs
        // and mi_api.rs (address.rs asks each).
        _ => return 0,
    };
    all[slot]
}
