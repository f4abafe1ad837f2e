//! snmalloc, built from source by `snmalloc-sys` with the `cc` crate (no cmake) and its
//! `libc-api` feature: the malloc family as `sn_*`, never unprefixed.
use core::ffi::c_void;
use snmalloc_sys as sn;

unsafe extern "C" {
    // Defined by the `libc-api` build (override/malloc.cc), not bound by the crate.
    fn sn_memalign(align: usize, size: usize) -> *mut c_void;
    fn sn_malloc_good_size(size: usize) -> usize;
}

#[inline(always)]
pub(crate) unsafe fn malloc(size: usize) -> *mut c_void {
    unsafe { sn::sn_malloc(size) }
}
#[inline(always)]
pub(crate) unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
    unsafe { sn::sn_calloc(n, size) }
}
#[inline(always)]
pub(crate) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    unsafe { sn::sn_realloc(p, size) }
}
#[inline(always)]
pub(crate) unsafe fn free(p: *mut c_void) {
    unsafe { sn::sn_free(p) }
}
/// snmalloc rounds an aligned request to `((align - 1) | (size - 1)) + 1`, which for size 0
/// wraps to 0 and yields an unaligned block: a zero-size aligned request asks for one byte.
#[inline(always)]
pub(crate) unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    unsafe { sn_memalign(align, size.max(1)) }
}
#[inline(always)]
pub(crate) unsafe fn usable_size(p: *mut c_void) -> usize {
    unsafe { sn::sn_malloc_usable_size(p) }
}

/// snmalloc's own rounding (`malloc_good_size`, its `round_size`).
pub(crate) fn size_class(size: usize) -> usize {
    unsafe { sn_malloc_good_size(size.max(1)) }
}

/// snmalloc has no version call and its sources carry none: the version is the one of the
/// crate that bundles it (snmalloc-sys follows snmalloc's releases).
pub(crate) fn version() -> &'static str {
    "0.7.6"
}

/// snmalloc's backend counters: (current, peak) bytes reserved from the OS.
pub(crate) fn usage() -> (usize, usize) {
    let (mut cur, mut peak) = (0usize, 0usize);
    unsafe { sn::sn_rust_statistics(&mut cur, &mut peak) };
    (cur, peak)
}
