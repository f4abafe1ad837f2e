//! The C rules of the malloc family, as glibc keeps them: errno (ENOMEM on failure, left
//! alone on success), the alignment checks, the overflow checks of calloc and
//! reallocarray, realloc's cases, valloc's and pvalloc's page rounding. Each function here
//! is what one call does once it reaches the backend; `exports.rs` (the names LD_PRELOAD
//! reaches), `patch/wrappers.rs` and `patch/native.rs` (a program's own allocator, switched)
//! all call these. Imports only the backend and the page size.
//!
//! The rules are written once over [`Heap`], the backend's four calls: [`Selected`] (the
//! backend chosen at start-up, dispatched on each call) for the names above, and
//! patch/native.rs's direct calls into one backend.
#![allow(clippy::missing_safety_doc)]
use core::ffi::c_void;
use shim_backend as be;

const PTR: usize = core::mem::size_of::<*const ()>();

/// The calls of a backend the rules are made of.
pub trait Heap {
    unsafe fn malloc(size: usize) -> *mut c_void;
    unsafe fn calloc(n: usize, size: usize) -> *mut c_void;
    unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void;
    unsafe fn free(p: *mut c_void);
}

/// The backend selected at start-up.
pub struct Selected;

impl Heap for Selected {
    #[inline(always)]
    unsafe fn malloc(size: usize) -> *mut c_void {
        unsafe { be::malloc(size) }
    }
    #[inline(always)]
    unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
        unsafe { be::calloc(n, size) }
    }
    #[inline(always)]
    unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
        unsafe { be::realloc(p, size) }
    }
    #[inline(always)]
    unsafe fn free(p: *mut c_void) {
        unsafe { be::free(p) }
    }
}

#[inline(always)]
pub fn set_errno(e: i32) {
    unsafe { *libc::__errno_location() = e };
}

#[inline(always)]
fn errno() -> i32 {
    unsafe { *libc::__errno_location() }
}

/// ENOMEM when the allocation failed.
#[inline(always)]
pub fn oom(p: *mut c_void) -> *mut c_void {
    if p.is_null() {
        set_errno(libc::ENOMEM);
    }
    p
}

#[inline(always)]
pub unsafe fn malloc(size: usize) -> *mut c_void {
    unsafe { malloc_in::<Selected>(size) }
}

#[inline(always)]
pub unsafe fn malloc_in<H: Heap>(size: usize) -> *mut c_void {
    oom(unsafe { H::malloc(size) })
}

/// calloc: a count times size that overflows fails with ENOMEM.
#[inline(always)]
pub unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
    unsafe { calloc_in::<Selected>(n, size) }
}

#[inline(always)]
pub unsafe fn calloc_in<H: Heap>(n: usize, size: usize) -> *mut c_void {
    if n.checked_mul(size).is_none() {
        set_errno(libc::ENOMEM);
        return core::ptr::null_mut();
    }
    oom(unsafe { H::calloc(n, size) })
}

/// malloc of `n` times `size` bytes, failing with ENOMEM when that overflows.
#[inline(always)]
pub unsafe fn malloc_n(n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => unsafe { malloc(total) },
        None => {
            set_errno(libc::ENOMEM);
            core::ptr::null_mut()
        }
    }
}

/// An allocation aligned to `align` (a power of two), with C's errno rules. Alignments up
/// to 8 are plain malloc (every backend aligns that far); 16 and more go to the backend's
/// aligned call, since jemalloc and mimalloc align small blocks to 8 only. errno is ENOMEM
/// on failure and untouched on success (mimalloc can set EINVAL on a large alignment it
/// then serves).
#[inline(always)]
pub unsafe fn aligned(align: usize, size: usize) -> *mut c_void {
    let saved = errno();
    let p = unsafe {
        if align <= PTR {
            be::malloc(size)
        } else {
            be::memalign(align, size)
        }
    };
    set_errno(if p.is_null() { libc::ENOMEM } else { saved });
    p
}

/// glibc's memalign (and aligned_alloc): absurd alignments fail with EINVAL, others round
/// up to a power of two.
#[inline(always)]
pub unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    if align > usize::MAX / 2 + 1 {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    }
    unsafe { aligned(align.next_power_of_two(), size) }
}

/// valloc: page-aligned.
#[inline(always)]
pub unsafe fn valloc(size: usize) -> *mut c_void {
    unsafe { memalign(crate::shared::page_size(), size) }
}

/// pvalloc: page-aligned, the size rounded up to whole pages (at least one).
#[inline(always)]
pub unsafe fn pvalloc(size: usize) -> *mut c_void {
    let ps = crate::shared::page_size();
    match size.checked_add(ps - 1) {
        Some(s) => unsafe { memalign(ps, (s & !(ps - 1)).max(ps)) },
        None => {
            set_errno(libc::ENOMEM);
            core::ptr::null_mut()
        }
    }
}

/// realloc as glibc does it: NULL is malloc, size 0 frees and returns NULL.
#[inline(always)]
pub unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    unsafe { realloc_in::<Selected>(p, size) }
}

#[inline(always)]
pub unsafe fn realloc_in<H: Heap>(p: *mut c_void, size: usize) -> *mut c_void {
    unsafe {
        if p.is_null() {
            oom(H::malloc(size))
        } else if size == 0 {
            H::free(p);
            core::ptr::null_mut()
        } else {
            oom(H::realloc(p, size))
        }
    }
}

/// reallocarray: realloc of `n` times `size` bytes, ENOMEM when that overflows.
#[inline(always)]
pub unsafe fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => unsafe { realloc(p, total) },
        None => {
            set_errno(libc::ENOMEM);
            core::ptr::null_mut()
        }
    }
}

/// posix_memalign around the allocation `call` makes (already dispatched): EINVAL for an
/// alignment that is not a power-of-two multiple of sizeof(void*), ENOMEM when out of
/// memory, errno left alone either way.
#[inline(always)]
pub unsafe fn posix_memalign(out: *mut *mut c_void, align: usize, call: impl FnOnce() -> *mut c_void) -> i32 {
    if align == 0 || !align.is_multiple_of(PTR) || !(align / PTR).is_power_of_two() {
        return libc::EINVAL;
    }
    let saved = errno();
    let p = call();
    set_errno(saved);
    if p.is_null() {
        return libc::ENOMEM;
    }
    unsafe { *out = p };
    0
}
