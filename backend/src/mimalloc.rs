//! mimalloc, built without its `override` feature: it defines `mi_*` only.
use core::ffi::c_void;
use libmimalloc_sys as mi;

#[inline(always)]
pub(crate) unsafe fn malloc(size: usize) -> *mut c_void {
    unsafe { mi::mi_malloc(size) }
}
#[inline(always)]
pub(crate) unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
    unsafe { mi::mi_calloc(n, size) }
}
#[inline(always)]
pub(crate) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    unsafe { mi::mi_realloc(p, size) }
}
#[inline(always)]
pub(crate) unsafe fn free(p: *mut c_void) {
    unsafe { mi::mi_free(p) }
}
#[inline(always)]
pub(crate) unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    unsafe { mi::mi_malloc_aligned(size, align) }
}
#[inline(always)]
pub(crate) unsafe fn usable_size(p: *mut c_void) -> usize {
    unsafe { mi::mi_usable_size(p) }
}

pub(crate) fn size_class(size: usize) -> usize {
    unsafe { mi::mi_good_size(size.max(1)) }
}

pub(crate) fn version() -> String {
    // mi_version() is 30302 for 3.3.2 (older releases: 212 for 2.1.2).
    let v = unsafe { mi::mi_version() } as u32;
    if v >= 10000 {
        format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
    } else {
        format!("{}.{}.{}", v / 100, (v / 10) % 10, v % 10)
    }
}

/// mimalloc's process counters: (current commit, peak commit, page faults).
pub(crate) fn process_info() -> (usize, usize, usize) {
    let (mut el, mut ut, mut st, mut rss, mut prss, mut cc, mut pc, mut pf) =
        (0usize, 0usize, 0usize, 0usize, 0usize, 0usize, 0usize, 0usize);
    unsafe {
        mi::mi_process_info(&mut el, &mut ut, &mut st, &mut rss, &mut prss, &mut cc, &mut pc, &mut pf);
    }
    (cc, pc, pf)
}
