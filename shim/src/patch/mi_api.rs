//! The wrappers of mimalloc's heap API and of its `mi_heap_*`-allocating calls (the kinds
//! from `MiHeapNew0` on in entries.rs). Recorded: the original, its blocks recorded. Switched:
//! a heap is emulated by shim_backend::emulate::mimalloc (a handle, and its blocks kept in a
//! table), its blocks come from the serving backend and are recorded, `mi_heap_destroy` frees
//! them; a heap the program got from its own mimalloc (before the switch) is the default heap.
#![allow(clippy::missing_safety_doc)]
use super::entries::Kind;
use super::owner;
use super::wrappers::{
    aligned_record, args, backend_aligned, backend_realloc_aligned, original, slots, switched, SLOTS,
};
use crate::hot::dispatch;
use core::ffi::{c_char, c_void};
use recorder::buffer::Args;
use recorder::Op;
use shim_backend::emulate::mimalloc as emi;
use shim_backend::emulate::{say_once, Trouble};
use shim_backend::{self as be};

type Heap = *mut c_void;

macro_rules! orig {
    ($kind:ident, $s:ident, ($($t:ty),*) -> $r:ty, ($($a:expr),*)) => {{
        let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { core::mem::transmute(original(Kind::$kind, $s)) };
        unsafe { f($($a),*) }
    }};
}

/// A block made for heap `h` by `make`, recorded as `op`; kept as the heap's when switched.
#[inline(always)]
fn made(h: Heap, op: Op, a: Args, make: impl FnOnce() -> *mut c_void) -> *mut c_void {
    dispatch::alloc(op, a, || {
        let q = make();
        if !q.is_null() {
            emi::heap_keep(h, q);
        }
        q
    })
}

/// A heap realloc, switched: the old block leaves its heap, the new one (or the old one, kept
/// on failure) is `h`'s. A block the program's own mimalloc made before the switch cannot be
/// resized into an emulated heap: NULL (it stays as it was).
#[inline(always)]
fn remade(h: Heap, p: *mut c_void, a: Args, make: impl FnOnce() -> *mut c_void) -> *mut c_void {
    if !p.is_null() && owner::is_old(p) {
        say_once("mi_heap_realloc", b"a block made before the switch", Trouble::CannotHonour, be::selected());
        return core::ptr::null_mut();
    }
    dispatch::alloc(Op::Realloc, a, || {
        emi::heap_forget(p);
        let q = make();
        let keep = if q.is_null() { p } else { q };
        if !keep.is_null() {
            emi::heap_keep(h, keep);
        }
        q
    })
}

/// mimalloc's zeroed blocks are zero to their usable size (its rezalloc counts on it): the
/// bytes of `q` past `from` zeroed.
fn zero_tail(q: *mut c_void, from: usize) -> *mut c_void {
    if !q.is_null() {
        let n = unsafe { be::usable_size(q) };
        if n > from {
            unsafe { core::ptr::write_bytes((q as *mut u8).add(from), 0, n - from) };
        }
    }
    q
}

fn valid_align(al: usize, off: usize) -> bool {
    if !al.is_power_of_two() {
        return false;
    }
    if !off.is_multiple_of(al) {
        // A block whose address + offset is aligned is not a block start any backend makes.
        say_once(
            "mi_heap_malloc_aligned_at",
            b"an offset that is not a multiple of the alignment",
            Trouble::CannotHonour,
            be::selected(),
        );
        return false;
    }
    true
}

// ---- heaps ----

extern "C" fn mi_heap_new0<const S: usize>() -> Heap {
    if switched() {
        return emi::heap_new();
    }
    orig!(MiHeapNew0, S, () -> Heap, ())
}

extern "C" fn mi_heap_delete1<const S: usize>(h: Heap) {
    if switched() {
        return emi::heap_end(h, None);
    }
    orig!(MiHeapDelete1, S, (Heap) -> (), (h))
}

unsafe fn backend_free(p: *mut c_void) {
    dispatch::released(Op::Free, Args { ptr: p as u64, ..Args::default() }, || unsafe { be::free(p) })
}

extern "C" fn mi_heap_destroy1<const S: usize>(h: Heap) {
    if switched() {
        return emi::heap_end(h, Some(backend_free));
    }
    // The blocks the original frees are not seen one by one: they stay live in the log.
    orig!(MiHeapDestroy1, S, (Heap) -> (), (h))
}

thread_local! {
    static DEFAULT: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

fn default_heap() -> Heap {
    match DEFAULT.try_with(|d| d.get()).unwrap_or(0) {
        0 => emi::heap_default(),
        h => h as Heap,
    }
}

extern "C" fn mi_heap_set_default1<const S: usize>(h: Heap) -> Heap {
    if switched() {
        if h.is_null() {
            return core::ptr::null_mut();
        }
        let old = default_heap();
        let _ = DEFAULT.try_with(|d| d.set(h as usize));
        return old;
    }
    orig!(MiHeapSetDefault1, S, (Heap) -> Heap, (h))
}

extern "C" fn mi_heap_get_default0<const S: usize>() -> Heap {
    if switched() {
        return default_heap();
    }
    orig!(MiHeapGetDefault0, S, () -> Heap, ())
}

extern "C" fn mi_heap_collect2<const S: usize>(h: Heap, force: bool) {
    if switched() {
        return emi::collect(be::selected(), force);
    }
    orig!(MiHeapCollect2, S, (Heap, bool) -> (), (h, force))
}

extern "C" fn mi_heap_contains2<const S: usize>(h: Heap, p: *const c_void) -> bool {
    if switched() {
        return emi::heap_contains(h, p);
    }
    orig!(MiHeapContains2, S, (Heap, *const c_void) -> bool, (h, p))
}

/// mimalloc's `mi_heap_area_t`.
#[repr(C)]
struct Area {
    blocks: *mut c_void,
    reserved: usize,
    committed: usize,
    used: usize,
    block_size: usize,
    full_block_size: usize,
}

type Visitor = Option<unsafe extern "C" fn(Heap, *const Area, *mut c_void, usize, *mut c_void) -> bool>;

/// Switched: each block of the heap is one area of one block (the backend's pages are not
/// mimalloc's); the visitor sees the area, then the block when `all`.
extern "C" fn mi_heap_visit4<const S: usize>(h: Heap, all: bool, visit: Visitor, arg: *mut c_void) -> bool {
    if switched() {
        let Some(visit) = visit else { return false };
        return emi::heap_blocks(h, |b| unsafe {
            let n = be::usable_size(b);
            let area =
                Area { blocks: b, reserved: n, committed: n, used: 1, block_size: n, full_block_size: n };
            visit(h, &area, core::ptr::null_mut(), n, arg) && (!all || visit(h, &area, b, n, arg))
        });
    }
    orig!(MiHeapVisit4, S, (Heap, bool, Visitor, *mut c_void) -> bool, (h, all, visit, arg))
}

extern "C" fn mi_check_owned1<const S: usize>(p: *const c_void) -> bool {
    if switched() && !(p.is_null() || owner::is_old(p as *mut c_void)) {
        return emi::owned(be::selected(), p);
    }
    orig!(MiCheckOwned1, S, (*const c_void) -> bool, (p))
}

extern "C" fn mi_in_heap_region1<const S: usize>(p: *const c_void) -> bool {
    if switched() && !(p.is_null() || owner::is_old(p as *mut c_void)) {
        return emi::in_heap_region(be::selected(), p);
    }
    orig!(MiInHeapRegion1, S, (*const c_void) -> bool, (p))
}

// ---- allocation in a heap ----

extern "C" fn mi_heap_alloc2<const S: usize>(h: Heap, n: usize) -> *mut c_void {
    if switched() {
        return made(h, Op::Malloc, args(n), || unsafe { crate::c_rules::malloc(n) });
    }
    dispatch::alloc(Op::Malloc, args(n), || orig!(MiHeapAlloc2, S, (Heap, usize) -> *mut c_void, (h, n)))
}

extern "C" fn mi_heap_zalloc2<const S: usize>(h: Heap, n: usize) -> *mut c_void {
    let a = Args { count: 1, ..args(n) };
    if switched() {
        return made(h, Op::Calloc, a, || zero_tail(unsafe { crate::c_rules::calloc(1, n) }, n));
    }
    dispatch::alloc(Op::Calloc, a, || orig!(MiHeapZalloc2, S, (Heap, usize) -> *mut c_void, (h, n)))
}

extern "C" fn mi_heap_calloc3<const S: usize>(h: Heap, c: usize, n: usize) -> *mut c_void {
    let a = Args { count: c as u64, ..args(n) };
    if switched() {
        return made(h, Op::Calloc, a, || zero_tail(unsafe { crate::c_rules::calloc(c, n) }, c * n));
    }
    dispatch::alloc(Op::Calloc, a, || orig!(MiHeapCalloc3, S, (Heap, usize, usize) -> *mut c_void, (h, c, n)))
}

extern "C" fn mi_heap_mallocn3<const S: usize>(h: Heap, c: usize, n: usize) -> *mut c_void {
    let a = args(c.saturating_mul(n));
    if switched() {
        return made(h, Op::Malloc, a, || unsafe { crate::c_rules::malloc_n(c, n) });
    }
    dispatch::alloc(
        Op::Malloc,
        a,
        || orig!(MiHeapMallocn3, S, (Heap, usize, usize) -> *mut c_void, (h, c, n)),
    )
}

fn realloc_args(p: *mut c_void, n: usize) -> Args {
    Args { old: p as u64, ..args(n) }
}

extern "C" fn mi_heap_realloc3<const S: usize>(h: Heap, p: *mut c_void, n: usize) -> *mut c_void {
    if switched() {
        return remade(h, p, realloc_args(p, n), || unsafe { backend_realloc_aligned(p, n, 0, false) });
    }
    let o = || orig!(MiHeapRealloc3, S, (Heap, *mut c_void, usize) -> *mut c_void, (h, p, n));
    dispatch::alloc(Op::Realloc, realloc_args(p, n), o)
}

extern "C" fn mi_heap_reallocf3<const S: usize>(h: Heap, p: *mut c_void, n: usize) -> *mut c_void {
    if switched() {
        let q = remade(h, p, realloc_args(p, n), || unsafe { backend_realloc_aligned(p, n, 0, false) });
        if q.is_null() && !p.is_null() && !owner::is_old(p) {
            emi::heap_forget(p);
            unsafe { backend_free(p) };
        }
        return q;
    }
    let o = || orig!(MiHeapReallocf3, S, (Heap, *mut c_void, usize) -> *mut c_void, (h, p, n));
    dispatch::alloc(Op::Realloc, realloc_args(p, n), o)
}

extern "C" fn mi_heap_rezalloc3<const S: usize>(h: Heap, p: *mut c_void, n: usize) -> *mut c_void {
    if switched() {
        return remade(h, p, realloc_args(p, n), || unsafe {
            zero_tail(backend_realloc_aligned(p, n, 0, true), n)
        });
    }
    let o = || orig!(MiHeapRezalloc3, S, (Heap, *mut c_void, usize) -> *mut c_void, (h, p, n));
    dispatch::alloc(Op::Realloc, realloc_args(p, n), o)
}

extern "C" fn mi_heap_reallocn4<const S: usize>(h: Heap, p: *mut c_void, c: usize, n: usize) -> *mut c_void {
    let a = realloc_args(p, c.saturating_mul(n));
    if switched() {
        let Some(total) = c.checked_mul(n) else { return core::ptr::null_mut() };
        return remade(h, p, a, || unsafe { backend_realloc_aligned(p, total, 0, false) });
    }
    let o = || orig!(MiHeapReallocn4, S, (Heap, *mut c_void, usize, usize) -> *mut c_void, (h, p, c, n));
    dispatch::alloc(Op::Realloc, a, o)
}

extern "C" fn mi_heap_recalloc4<const S: usize>(h: Heap, p: *mut c_void, c: usize, n: usize) -> *mut c_void {
    let a = realloc_args(p, c.saturating_mul(n));
    if switched() {
        let Some(total) = c.checked_mul(n) else { return core::ptr::null_mut() };
        return remade(h, p, a, || unsafe { zero_tail(backend_realloc_aligned(p, total, 0, true), total) });
    }
    let o = || orig!(MiHeapRecalloc4, S, (Heap, *mut c_void, usize, usize) -> *mut c_void, (h, p, c, n));
    dispatch::alloc(Op::Realloc, a, o)
}

/// Switched aligned allocation in a heap: `total` bytes aligned to `al` at `off`.
fn aligned_in(h: Heap, total: usize, al: usize, off: usize, zero: bool, a: (Op, Args)) -> *mut c_void {
    if !valid_align(al, off) {
        return core::ptr::null_mut();
    }
    made(h, a.0, a.1, || unsafe {
        let q = backend_aligned(al, total, zero);
        if zero {
            zero_tail(q, total)
        } else {
            q
        }
    })
}

fn aligned_realloc_in(h: Heap, p: *mut c_void, n: usize, al: usize, off: usize, zero: bool) -> *mut c_void {
    if !valid_align(al, off) {
        return core::ptr::null_mut();
    }
    remade(h, p, realloc_args(p, n), || unsafe {
        let q = backend_realloc_aligned(p, n, al, zero);
        if zero {
            zero_tail(q, n)
        } else {
            q
        }
    })
}

extern "C" fn mi_heap_alloc_aligned_at4<const S: usize>(
    h: Heap,
    n: usize,
    al: usize,
    off: usize,
) -> *mut c_void {
    if switched() {
        return aligned_in(h, n, al, off, false, aligned_record(al, n));
    }
    let o = || orig!(MiHeapAllocAlignedAt4, S, (Heap, usize, usize, usize) -> *mut c_void, (h, n, al, off));
    let (op, a) = aligned_record(al, n);
    dispatch::alloc(op, a, o)
}

extern "C" fn mi_heap_alloc_aligned3<const S: usize>(h: Heap, n: usize, al: usize) -> *mut c_void {
    if switched() {
        return aligned_in(h, n, al, 0, false, aligned_record(al, n));
    }
    let o = || orig!(MiHeapAllocAligned3, S, (Heap, usize, usize) -> *mut c_void, (h, n, al));
    let (op, a) = aligned_record(al, n);
    dispatch::alloc(op, a, o)
}

fn zeroed_record(al: usize, c: usize, n: usize) -> (Op, Args) {
    if al > 16 {
        aligned_record(al, c.saturating_mul(n))
    } else {
        (Op::Calloc, Args { count: c as u64, ..args(n) })
    }
}

extern "C" fn mi_heap_zalloc_aligned_at4<const S: usize>(
    h: Heap,
    n: usize,
    al: usize,
    off: usize,
) -> *mut c_void {
    if switched() {
        return aligned_in(h, n, al, off, true, zeroed_record(al, 1, n));
    }
    let o = || orig!(MiHeapZallocAlignedAt4, S, (Heap, usize, usize, usize) -> *mut c_void, (h, n, al, off));
    let (op, a) = zeroed_record(al, 1, n);
    dispatch::alloc(op, a, o)
}

extern "C" fn mi_heap_zalloc_aligned3<const S: usize>(h: Heap, n: usize, al: usize) -> *mut c_void {
    if switched() {
        return aligned_in(h, n, al, 0, true, zeroed_record(al, 1, n));
    }
    let o = || orig!(MiHeapZallocAligned3, S, (Heap, usize, usize) -> *mut c_void, (h, n, al));
    let (op, a) = zeroed_record(al, 1, n);
    dispatch::alloc(op, a, o)
}

extern "C" fn mi_heap_calloc_aligned_at5<const S: usize>(
    h: Heap,
    c: usize,
    n: usize,
    al: usize,
    off: usize,
) -> *mut c_void {
    if switched() {
        let Some(total) = c.checked_mul(n) else { return core::ptr::null_mut() };
        return aligned_in(h, total, al, off, true, zeroed_record(al, c, n));
    }
    let o = || orig!(MiHeapCallocAlignedAt5, S, (Heap, usize, usize, usize, usize) -> *mut c_void, (h, c, n, al, off));
    let (op, a) = zeroed_record(al, c, n);
    dispatch::alloc(op, a, o)
}

extern "C" fn mi_heap_calloc_aligned4<const S: usize>(h: Heap, c: usize, n: usize, al: usize) -> *mut c_void {
    if switched() {
        let Some(total) = c.checked_mul(n) else { return core::ptr::null_mut() };
        return aligned_in(h, total, al, 0, true, zeroed_record(al, c, n));
    }
    let o = || orig!(MiHeapCallocAligned4, S, (Heap, usize, usize, usize) -> *mut c_void, (h, c, n, al));
    let (op, a) = zeroed_record(al, c, n);
    dispatch::alloc(op, a, o)
}

macro_rules! realloc_aligned {
    ($name:ident, $kind:ident, $zero:expr, ($($extra:ident),*)) => {
        extern "C" fn $name<const S: usize>(h: Heap, p: *mut c_void, n: usize, al: usize $(, $extra: usize)*) -> *mut c_void {
            if switched() {
                #[allow(unused_mut, unused_assignments)]
                let mut off = 0;
                $(off = $extra;)*
                return aligned_realloc_in(h, p, n, al, off, $zero);
            }
            let o = || orig!($kind, S, (Heap, *mut c_void, usize, usize $(, realloc_aligned!(@t $extra))*) -> *mut c_void, (h, p, n, al $(, $extra)*));
            dispatch::alloc(Op::Realloc, realloc_args(p, n), o)
        }
    };
    (@t $x:ident) => { usize };
}
realloc_aligned!(mi_heap_realloc_aligned4, MiHeapReallocAligned4, false, ());
realloc_aligned!(mi_heap_realloc_aligned_at5, MiHeapReallocAlignedAt5, false, (off_at));
realloc_aligned!(mi_heap_rezalloc_aligned4, MiHeapRezallocAligned4, true, ());
realloc_aligned!(mi_heap_rezalloc_aligned_at5, MiHeapRezallocAlignedAt5, true, (off_at));

extern "C" fn mi_heap_recalloc_aligned5<const S: usize>(
    h: Heap,
    p: *mut c_void,
    c: usize,
    n: usize,
    al: usize,
) -> *mut c_void {
    if switched() {
        let Some(total) = c.checked_mul(n) else { return core::ptr::null_mut() };
        return aligned_realloc_in(h, p, total, al, 0, true);
    }
    let o = || orig!(MiHeapRecallocAligned5, S, (Heap, *mut c_void, usize, usize, usize) -> *mut c_void, (h, p, c, n, al));
    dispatch::alloc(Op::Realloc, realloc_args(p, c.saturating_mul(n)), o)
}

extern "C" fn mi_heap_recalloc_aligned_at6<const S: usize>(
    h: Heap,
    p: *mut c_void,
    c: usize,
    n: usize,
    al: usize,
    off: usize,
) -> *mut c_void {
    if switched() {
        let Some(total) = c.checked_mul(n) else { return core::ptr::null_mut() };
        return aligned_realloc_in(h, p, total, al, off, true);
    }
    let o = || orig!(MiHeapRecallocAlignedAt6, S, (Heap, *mut c_void, usize, usize, usize, usize) -> *mut c_void, (h, p, c, n, al, off));
    dispatch::alloc(Op::Realloc, realloc_args(p, c.saturating_mul(n)), o)
}

/// A copy of the `len` bytes at `s` and a NUL in a new block of heap `h`.
fn copy_in(h: Heap, s: *const c_char, len: usize) -> *mut c_void {
    made(h, Op::Malloc, args(len + 1), || unsafe {
        let q = crate::c_rules::malloc(len + 1);
        if !q.is_null() {
            core::ptr::copy_nonoverlapping(s as *const u8, q as *mut u8, len);
            *(q as *mut u8).add(len) = 0;
        }
        q
    })
}

extern "C" fn mi_heap_strdup2<const S: usize>(h: Heap, s: *const c_char) -> *mut c_char {
    if switched() {
        if s.is_null() {
            return core::ptr::null_mut();
        }
        return copy_in(h, s, unsafe { libc::strlen(s) }) as *mut c_char;
    }
    // The length is not known before the call: recorded as the block's usable size.
    dispatch::alloc(Op::Malloc, args(0), || {
        orig!(MiHeapStrdup2, S, (Heap, *const c_char) -> *mut c_char, (h, s)) as *mut c_void
    }) as *mut c_char
}

extern "C" fn mi_heap_strndup3<const S: usize>(h: Heap, s: *const c_char, n: usize) -> *mut c_char {
    if switched() {
        if s.is_null() {
            return core::ptr::null_mut();
        }
        return copy_in(h, s, unsafe { libc::strnlen(s, n) }) as *mut c_char;
    }
    dispatch::alloc(Op::Malloc, args(0), || {
        orig!(MiHeapStrndup3, S, (Heap, *const c_char, usize) -> *mut c_char, (h, s, n)) as *mut c_void
    }) as *mut c_char
}

extern "C" fn mi_heap_realpath3<const S: usize>(
    h: Heap,
    name: *const c_char,
    resolved: *mut c_char,
) -> *mut c_char {
    if switched() {
        if !resolved.is_null() {
            return unsafe { libc::realpath(name, resolved) };
        }
        let mut buf = [0 as c_char; libc::PATH_MAX as usize + 1];
        let r = unsafe { libc::realpath(name, buf.as_mut_ptr()) };
        if r.is_null() {
            return r;
        }
        return copy_in(h, buf.as_ptr(), unsafe { libc::strlen(buf.as_ptr()) }) as *mut c_char;
    }
    if !resolved.is_null() {
        return orig!(MiHeapRealpath3, S, (Heap, *const c_char, *mut c_char) -> *mut c_char, (h, name, resolved));
    }
    dispatch::alloc(Op::Malloc, args(0), || {
        orig!(MiHeapRealpath3, S, (Heap, *const c_char, *mut c_char) -> *mut c_char, (h, name, resolved))
            as *mut c_void
    }) as *mut c_char
}

extern "C" fn mi_heap_new_in_arena1<const S: usize>(arena: i32) -> Heap {
    if switched() {
        return emi::heap_new();
    }
    orig!(MiHeapNewInArena1, S, (i32) -> Heap, (arena))
}

extern "C" fn mi_register_deferred_free2<const S: usize>(f: *mut c_void, arg: *mut c_void) {
    orig!(MiRegisterDeferredFree2, S, (*mut c_void, *mut c_void) -> (), (f, arg))
}

/// The calls of the default heap: switched, the heap call on the thread's default heap;
/// recorded, the original, recorded as `$op`.
macro_rules! on_default {
    ($name:ident, $kind:ident, $heapfn:ident, ($($a:ident: $t:ty),*) -> $r:ty, $rec:expr) => {
        extern "C" fn $name<const S: usize>($($a: $t),*) -> $r {
            if switched() {
                return $heapfn::<S>(default_heap(), $($a),*);
            }
            let (op, a): (Op, Args) = $rec;
            dispatch::alloc(op, a, || orig!($kind, S, ($($t),*) -> $r, ($($a),*)) as *mut c_void) as $r
        }
    };
}
on_default!(mi_rezalloc2, MiRezalloc2, mi_heap_rezalloc3, (p: *mut c_void, n: usize) -> *mut c_void, (Op::Realloc, realloc_args(p, n)));
on_default!(mi_recalloc3, MiRecalloc3, mi_heap_recalloc4, (p: *mut c_void, c: usize, n: usize) -> *mut c_void, (Op::Realloc, realloc_args(p, c.saturating_mul(n))));
on_default!(mi_alloc_aligned_at3, MiAllocAlignedAt3, mi_heap_alloc_aligned_at4, (n: usize, al: usize, off: usize) -> *mut c_void, aligned_record(al, n));
on_default!(mi_zalloc_aligned_at3, MiZallocAlignedAt3, mi_heap_zalloc_aligned_at4, (n: usize, al: usize, off: usize) -> *mut c_void, zeroed_record(al, 1, n));
on_default!(mi_calloc_aligned_at4, MiCallocAlignedAt4, mi_heap_calloc_aligned_at5, (c: usize, n: usize, al: usize, off: usize) -> *mut c_void, zeroed_record(al, c, n));
on_default!(mi_realloc_aligned_at4, MiReallocAlignedAt4, mi_heap_realloc_aligned_at5, (p: *mut c_void, n: usize, al: usize, off: usize) -> *mut c_void, (Op::Realloc, realloc_args(p, n)));
on_default!(mi_rezalloc_aligned3, MiRezallocAligned3, mi_heap_rezalloc_aligned4, (p: *mut c_void, n: usize, al: usize) -> *mut c_void, (Op::Realloc, realloc_args(p, n)));
on_default!(mi_rezalloc_aligned_at4, MiRezallocAlignedAt4, mi_heap_rezalloc_aligned_at5, (p: *mut c_void, n: usize, al: usize, off: usize) -> *mut c_void, (Op::Realloc, realloc_args(p, n)));
on_default!(mi_recalloc_aligned4, MiRecallocAligned4, mi_heap_recalloc_aligned5, (p: *mut c_void, c: usize, n: usize, al: usize) -> *mut c_void, (Op::Realloc, realloc_args(p, c.saturating_mul(n))));
on_default!(mi_recalloc_aligned_at5, MiRecallocAlignedAt5, mi_heap_recalloc_aligned_at6, (p: *mut c_void, c: usize, n: usize, al: usize, off: usize) -> *mut c_void, (Op::Realloc, realloc_args(p, c.saturating_mul(n))));
on_default!(mi_strdup1, MiStrdup1, mi_heap_strdup2, (s: *const c_char) -> *mut c_char, (Op::Malloc, args(0)));
on_default!(mi_strndup2, MiStrndup2, mi_heap_strndup3, (s: *const c_char, n: usize) -> *mut c_char, (Op::Malloc, args(0)));

extern "C" fn mi_realpath2<const S: usize>(name: *const c_char, resolved: *mut c_char) -> *mut c_char {
    if switched() {
        return mi_heap_realpath3::<S>(default_heap(), name, resolved);
    }
    if !resolved.is_null() {
        return orig!(MiRealpath2, S, (*const c_char, *mut c_char) -> *mut c_char, (name, resolved));
    }
    dispatch::alloc(Op::Malloc, args(0), || {
        orig!(MiRealpath2, S, (*const c_char, *mut c_char) -> *mut c_char, (name, resolved)) as *mut c_void
    }) as *mut c_char
}

/// mi_reallocarr(&p, count, size): NetBSD's reallocarr, 0 or an errno; `p` unchanged on
/// failure.
extern "C" fn mi_reallocarr3<const S: usize>(pp: *mut *mut c_void, c: usize, n: usize) -> i32 {
    if switched() {
        if pp.is_null() {
            return libc::EINVAL;
        }
        let Some(total) = c.checked_mul(n) else { return libc::EOVERFLOW };
        let q = mi_heap_reallocn4::<S>(default_heap(), unsafe { *pp }, c, n);
        if q.is_null() && total != 0 {
            return libc::ENOMEM;
        }
        unsafe { *pp = q };
        return 0;
    }
    let old = if pp.is_null() { core::ptr::null_mut() } else { unsafe { *pp } };
    let mut rc = 0;
    dispatch::alloc(Op::Realloc, realloc_args(old, c.saturating_mul(n)), || {
        rc = orig!(MiReallocarr3, S, (*mut *mut c_void, usize, usize) -> i32, (pp, c, n));
        if rc == 0 && !pp.is_null() {
            unsafe { *pp }
        } else {
            core::ptr::null_mut()
        }
    });
    rc
}

/// The wrapper of `kind` (one of this file's) in `slot`; 0 for a kind that is not.
pub fn address(kind: Kind, slot: usize) -> usize {
    use Kind::*;
    let all: [usize; SLOTS] = match kind {
        MiHeapNew0 => slots!(mi_heap_new0),
        MiHeapDelete1 => slots!(mi_heap_delete1),
        MiHeapDestroy1 => slots!(mi_heap_destroy1),
        MiHeapSetDefault1 => slots!(mi_heap_set_default1),
        MiHeapGetDefault0 => slots!(mi_heap_get_default0),
        MiHeapCollect2 => slots!(mi_heap_collect2),
        MiHeapContains2 => slots!(mi_heap_contains2),
        MiHeapVisit4 => slots!(mi_heap_visit4),
        MiCheckOwned1 => slots!(mi_check_owned1),
        MiHeapAlloc2 => slots!(mi_heap_alloc2),
        MiHeapZalloc2 => slots!(mi_heap_zalloc2),
        MiHeapCalloc3 => slots!(mi_heap_calloc3),
        MiHeapMallocn3 => slots!(mi_heap_mallocn3),
        MiHeapRealloc3 => slots!(mi_heap_realloc3),
        MiHeapReallocf3 => slots!(mi_heap_reallocf3),
        MiHeapRezalloc3 => slots!(mi_heap_rezalloc3),
        MiHeapReallocn4 => slots!(mi_heap_reallocn4),
        MiHeapRecalloc4 => slots!(mi_heap_recalloc4),
        MiHeapAllocAlignedAt4 => slots!(mi_heap_alloc_aligned_at4),
        MiHeapZallocAlignedAt4 => slots!(mi_heap_zalloc_aligned_at4),
        MiHeapCallocAlignedAt5 => slots!(mi_heap_calloc_aligned_at5),
        MiHeapReallocAlignedAt5 => slots!(mi_heap_realloc_aligned_at5),
        MiHeapRezallocAlignedAt5 => slots!(mi_heap_rezalloc_aligned_at5),
        MiHeapRecallocAlignedAt6 => slots!(mi_heap_recalloc_aligned_at6),
        MiHeapAllocAligned3 => slots!(mi_heap_alloc_aligned3),
        MiHeapZallocAligned3 => slots!(mi_heap_zalloc_aligned3),
        MiHeapCallocAligned4 => slots!(mi_heap_calloc_aligned4),
        MiHeapReallocAligned4 => slots!(mi_heap_realloc_aligned4),
        MiHeapRezallocAligned4 => slots!(mi_heap_rezalloc_aligned4),
        MiHeapRecallocAligned5 => slots!(mi_heap_recalloc_aligned5),
        MiHeapStrdup2 => slots!(mi_heap_strdup2),
        MiHeapStrndup3 => slots!(mi_heap_strndup3),
        MiHeapRealpath3 => slots!(mi_heap_realpath3),
        MiInHeapRegion1 => slots!(mi_in_heap_region1),
        MiHeapNewInArena1 => slots!(mi_heap_new_in_arena1),
        MiRegisterDeferredFree2 => slots!(mi_register_deferred_free2),
        MiRezalloc2 => slots!(mi_rezalloc2),
        MiRecalloc3 => slots!(mi_recalloc3),
        MiAllocAlignedAt3 => slots!(mi_alloc_aligned_at3),
        MiZallocAlignedAt3 => slots!(mi_zalloc_aligned_at3),
        MiCallocAlignedAt4 => slots!(mi_calloc_aligned_at4),
        MiReallocAlignedAt4 => slots!(mi_realloc_aligned_at4),
        MiRezallocAligned3 => slots!(mi_rezalloc_aligned3),
        MiRezallocAlignedAt4 => slots!(mi_rezalloc_aligned_at4),
        MiRecallocAligned4 => slots!(mi_recalloc_aligned4),
        MiRecallocAlignedAt5 => slots!(mi_recalloc_aligned_at5),
        MiStrdup1 => slots!(mi_strdup1),
        MiStrndup2 => slots!(mi_strndup2),
        MiRealpath2 => slots!(mi_realpath2),
        MiReallocarr3 => slots!(mi_reallocarr3),
        _ => return 0,
    };
    all[slot]
}
