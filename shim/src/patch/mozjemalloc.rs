//! What mozjemalloc's own patched entry points run (entries.rs's `MOZJEMALLOC`; its standard
//! names take wrappers.rs's wrappers). Recorded: the call is recorded around the original.
//! Switched: an arena call is served by the backend as the same call without an arena
//! (mozjemalloc's contract: plain `free` and `realloc` may take an arena's blocks, so an arena
//! is a placement hint, not a heap of its own), except that a block mozjemalloc made goes back
//! to it; its statistics add the backend's figures to what mozjemalloc still holds; its purges
//! purge both.
#![allow(clippy::missing_safety_doc)]
use super::entries::Kind;
use super::wrappers::{args, freed, original, release, resize, slots, switched, SLOTS};
use crate::c_rules as c;
use crate::hot::dispatch;
use core::ffi::c_void;
use recorder::buffer::Args;
use recorder::Op;
use shim_backend::{self as be, emulate::mozjemalloc as emu};

/// mozjemalloc's arena_id_t.
type Arena = usize;

/// Calls the original of this wrapper's entry point.
macro_rules! orig {
    ($kind:ident, $s:ident, ($($t:ty),*) -> $r:ty, ($($a:expr),*)) => {{
        let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { core::mem::transmute(original(Kind::$kind, $s)) };
        unsafe { f($($a),*) }
    }};
}

extern "C" fn arena_alloc2<const S: usize>(a: Arena, n: usize) -> *mut c_void {
    if switched() {
        return dispatch::alloc(Op::Malloc, args(n), || unsafe { c::malloc(n) });
    }
    dispatch::alloc(Op::Malloc, args(n), || orig!(ArenaAlloc2, S, (Arena, usize) -> *mut c_void, (a, n)))
}

extern "C" fn arena_calloc3<const S: usize>(a: Arena, k: usize, n: usize) -> *mut c_void {
    let r = Args { count: k as u64, size: n as u64, ..Args::default() };
    if switched() {
        return dispatch::alloc(Op::Calloc, r, || unsafe { c::calloc(k, n) });
    }
    dispatch::alloc(Op::Calloc, r, || orig!(ArenaCalloc3, S, (Arena, usize, usize) -> *mut c_void, (a, k, n)))
}

extern "C" fn arena_realloc3<const S: usize>(a: Arena, p: *mut c_void, n: usize) -> *mut c_void {
    let r = Args { old: p as u64, ..args(n) };
    resize(
        Op::Realloc,
        p,
        r,
        || orig!(ArenaRealloc3, S, (Arena, *mut c_void, usize) -> *mut c_void, (a, p, n)),
        || unsafe { c::realloc(p, n) },
    )
}

extern "C" fn arena_free2<const S: usize>(a: Arena, p: *mut c_void) {
    release(p, Op::Free, freed(p), || orig!(ArenaFree2, S, (Arena, *mut c_void) -> (), (a, p)))
}

extern "C" fn arena_memalign3<const S: usize>(a: Arena, al: usize, n: usize) -> *mut c_void {
    let r = Args { align: al as u64, size: n as u64, ..Args::default() };
    if switched() {
        return dispatch::alloc(Op::Memalign, r, || unsafe { c::memalign(al, n) });
    }
    dispatch::alloc(
        Op::Memalign,
        r,
        || orig!(ArenaMemalign3, S, (Arena, usize, usize) -> *mut c_void, (a, al, n)),
    )
}

extern "C" fn stats_lite1<const S: usize>(out: *mut c_void) {
    orig!(MozStatsLite1, S, (*mut c_void) -> (), (out));
    if switched() {
        unsafe { emu::add_to_stats_lite(be::selected(), out) };
    }
}

extern "C" fn purge0<const S: usize>() {
    orig!(MozPurge0, S, () -> (), ());
    if switched() {
        emu::purge(be::selected());
    }
}

/// The wrapper of mozjemalloc's `kind` in `slot` (0 for a kind that is not mozjemalloc's).
/// The wrapper of mozjemalloc's own call `kind` in `slot` (0: not one of them).
pub fn address(kind: Kind, slot: usize) -> usize {
    const _: () = assert!(SLOTS == 8);
    let all: [usize; SLOTS] = match kind {
        Kind::ArenaAlloc2 => slots!(arena_alloc2),
        Kind::ArenaCalloc3 => slots!(arena_calloc3),
        Kind::ArenaRealloc3 => slots!(arena_realloc3),
        Kind::ArenaFree2 => slots!(arena_free2),
        Kind::ArenaMemalign3 => slots!(arena_memalign3),
        Kind::MozStatsLite1 => slots!(stats_lite1),
        Kind::MozPurge0 => slots!(purge0),
        _ => return 0,
    };
    all[slot]
}
