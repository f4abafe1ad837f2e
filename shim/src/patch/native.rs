//! Switching at native speed: when a program's allocator is switched and nothing is recorded
//! (`SHIM_TRACE=0`, for good), its busiest entry points jump to a copy of their wrapper made
//! for the backend in use, which calls that backend's function directly: no recording state
//! to read, no switch to test, no dispatch on the backend. Only a block the program's own
//! allocator made before the switch takes the general wrapper (the old-block test is one
//! cached region lookup, and answers at once where no old block can be).
//!
//! The entry points covered are those that carry a program's traffic: malloc, calloc,
//! realloc, free and the sized frees (jemalloc's `sdallocx`, which the backend jemalloc gets
//! as `sdallocx` too; C++'s sized delete, a plain free). The others keep their general wrapper.
use super::entries::Kind;
use super::owner;
use super::wrappers::SLOTS;
use crate::c_rules::{self as c, Heap};
use core::ffi::c_void;
use shim_backend::direct as d;
use shim_backend::Backend;

/// The general wrapper of `kind` in `slot`, for the rare old block.
#[inline(never)]
#[cold]
fn general(kind: Kind, slot: usize) -> usize {
    super::address::wrapper(kind, slot)
}

macro_rules! general {
    ($kind:ident, $s:ident, ($($t:ty),*) -> $r:ty, ($($a:expr),*)) => {{
        let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { core::mem::transmute(general(Kind::$kind, $s)) };
        unsafe { f($($a),*) }
    }};
}

/// Backend `B`'s calls, made directly, for the C rules (c_rules.rs).
struct Direct<const B: u8>;

impl<const B: u8> Heap for Direct<B> {
    #[inline(always)]
    unsafe fn malloc(size: usize) -> *mut c_void {
        unsafe { d::malloc::<B>(size) }
    }
    #[inline(always)]
    unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
        unsafe { d::calloc::<B>(n, size) }
    }
    #[inline(always)]
    unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
        unsafe { d::realloc::<B>(p, size) }
    }
    #[inline(always)]
    unsafe fn free(p: *mut c_void) {
        unsafe { d::free::<B>(p) }
    }
}

extern "C" fn malloc<const S: usize, const B: u8>(n: usize) -> *mut c_void {
    unsafe { c::malloc_in::<Direct<B>>(n) }
}

extern "C" fn calloc<const S: usize, const B: u8>(c: usize, n: usize) -> *mut c_void {
    unsafe { c::calloc_in::<Direct<B>>(c, n) }
}

extern "C" fn realloc<const S: usize, const B: u8>(p: *mut c_void, n: usize) -> *mut c_void {
    if !p.is_null() && owner::is_old(p) {
        return general!(Realloc2, S, (*mut c_void, usize) -> *mut c_void, (p, n));
    }
    unsafe { c::realloc_in::<Direct<B>>(p, n) }
}

extern "C" fn free<const S: usize, const B: u8>(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    if owner::is_old(p) {
        return general!(Free1, S, (*mut c_void) -> (), (p));
    }
    unsafe { d::free::<B>(p) }
}

/// free_sized(p, n), sized delete(p, n), mi_free_size(p, n): a plain free (the size names
/// the request, and the block may have been made aligned: only jemalloc's own sdallocx
/// carries the flags that tell).
extern "C" fn free_sized2<const S: usize, const B: u8>(p: *mut c_void, n: usize) {
    if p.is_null() {
        return;
    }
    if owner::is_old(p) {
        return general!(FreeSized2, S, (*mut c_void, usize) -> (), (p, n));
    }
    unsafe { d::free::<B>(p) }
}

/// delete(p, n, align): a plain free.
extern "C" fn free_sized3<const S: usize, const B: u8>(p: *mut c_void, n: usize, x: usize) {
    if p.is_null() {
        return;
    }
    if owner::is_old(p) {
        return general!(FreeSized3, S, (*mut c_void, usize, usize) -> (), (p, n, x));
    }
    unsafe { d::free::<B>(p) }
}

/// jemalloc's sdallocx(p, n, flags): to the backend jemalloc as sdallocx (the program passes
/// the size and flags it allocated with, which jemalloc then need not look up).
extern "C" fn sdallocx<const S: usize, const B: u8>(p: *mut c_void, n: usize, flags: i32) {
    if p.is_null() {
        return;
    }
    if owner::is_old(p) {
        return general!(FreeSized3, S, (*mut c_void, usize, i32) -> (), (p, n, flags));
    }
    unsafe { d::free_sized::<B>(p, n, flags) }
}

macro_rules! slots {
    ($f:ident, $b:expr) => {
        [
            $f::<0, $b> as *const () as usize,
            $f::<1, $b> as *const () as usize,
            $f::<2, $b> as *const () as usize,
            $f::<3, $b> as *const () as usize,
            $f::<4, $b> as *const () as usize,
            $f::<5, $b> as *const () as usize,
            $f::<6, $b> as *const () as usize,
            $f::<7, $b> as *const () as usize,
        ]
    };
}

macro_rules! for_backend {
    ($f:ident, $b:expr) => {
        match $b {
            Backend::Glibc => slots!($f, 0),
            Backend::Jemalloc => slots!($f, 1),
            Backend::Mimalloc => slots!($f, 2),
            Backend::Tcmalloc => slots!($f, 3),
            Backend::Snmalloc => slots!($f, 4),
            Backend::Rpmalloc => slots!($f, 5),
            Backend::Own => slots!($f, 6),
        }
    };
}

/// The address the entry point `name` of `kind` in `slot` jumps to when switched to `b` with
/// nothing recorded: a direct copy where there is one, else the general wrapper.
pub fn address(name: &str, kind: Kind, slot: usize, b: Backend) -> usize {
    const _: () = assert!(SLOTS == 8);
    let all: [usize; SLOTS] = match kind {
        Kind::Alloc1 => for_backend!(malloc, b),
        Kind::Calloc2 => for_backend!(calloc, b),
        Kind::Realloc2 => for_backend!(realloc, b),
        Kind::Free1 => for_backend!(free, b),
        Kind::FreeSized2 => for_backend!(free_sized2, b),
        Kind::FreeSized3 if name.ends_with("sdallocx") => for_backend!(sdallocx, b),
        Kind::FreeSized3 => for_backend!(free_sized3, b),
        _ => return super::address::wrapper(kind, slot),
    };
    all[slot]
}
