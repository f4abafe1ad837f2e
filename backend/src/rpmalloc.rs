//! rpmalloc, built from source by `rpmalloc-sys` (without its `preload` feature: it defines
//! `rp*` names only, and no malloc or pthread_create of its own).
//!
//! Without `preload` rpmalloc does not set itself up: every thread needs
//! `rpmalloc_thread_initialize` before its first call and `rpmalloc_thread_finalize` when it
//! ends (or its heap is never reused). The first call of each thread here initialises it and
//! sets a pthread key (created before the first allocation, a low key: setting it never
//! allocates) whose destructor finalises the thread.
//!
//! Two gaps of rpmalloc's are closed here rather than passed on: a request near SIZE_MAX
//! wraps around inside rpmalloc (and `rprealloc` returns the old block when it checks), so
//! requests beyond `isize::MAX` fail here; and alignments of a span (64 KiB) and more are
//! refused with EINVAL, so those get a mapping of their own, told apart on free by their
//! address: rpmalloc never returns a span-aligned pointer (a span starts with its header).
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use rpmalloc_sys as rp;

unsafe extern "C" {
    // rpmalloc-sys binds it without the argument rpmalloc 1.4.2 added.
    fn rpmalloc_thread_finalize(release_caches: c_int);
}

/// rpmalloc's default span size: its largest alignment, and the alignment of no block it
/// returns.
const SPAN: usize = 64 * 1024;
const MAX: usize = isize::MAX as usize;
static KEY: AtomicU32 = AtomicU32::new(u32::MAX);

unsafe extern "C" fn thread_end(_: *mut c_void) {
    unsafe { rpmalloc_thread_finalize(1) };
}

/// Sets rpmalloc up for this process (and the calling thread) and creates the key.
pub(crate) fn init() {
    unsafe {
        rp::rpmalloc_initialize();
        if KEY.load(Relaxed) == u32::MAX {
            let mut k: libc::pthread_key_t = 0;
            if libc::pthread_key_create(&mut k, Some(thread_end)) == 0
                && KEY.compare_exchange(u32::MAX, k, Relaxed, Relaxed).is_err()
            {
                libc::pthread_key_delete(k);
            }
        }
    }
}

/// Gives the calling thread's caches back to rpmalloc's global cache (which frees what it
/// cannot hold): rpmalloc has no other call that does, so the thread's heap is finalised
/// with its caches released and set up again (its blocks stay valid: a finalised heap is
/// handed to the next thread that starts, or back to this one).
pub(crate) fn release_thread_caches() {
    unsafe {
        if rp::rpmalloc_is_thread_initialized() != 0 {
            rpmalloc_thread_finalize(1);
            rp::rpmalloc_thread_initialize();
        }
    }
}

#[inline(always)]
fn thread() {
    if unsafe { rp::rpmalloc_is_thread_initialized() } == 0 {
        thread_start();
    }
}

#[cold]
#[inline(never)]
fn thread_start() {
    init(); // the process the first time, then the thread
    unsafe {
        let k = KEY.load(Relaxed);
        if k != u32::MAX {
            libc::pthread_setspecific(k, core::ptr::without_provenance::<c_void>(1));
        }
    }
}

#[inline(always)]
pub(crate) unsafe fn malloc(size: usize) -> *mut c_void {
    if size > MAX {
        return core::ptr::null_mut();
    }
    thread();
    unsafe { rp::rpmalloc(size) }
}
#[inline(always)]
pub(crate) unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
    if n.saturating_mul(size) > MAX {
        return core::ptr::null_mut();
    }
    thread();
    unsafe { rp::rpcalloc(n, size) }
}
#[inline(always)]
pub(crate) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if size > MAX {
        return core::ptr::null_mut();
    }
    if (p as usize).is_multiple_of(SPAN) {
        return unsafe { big::realloc(p, size) };
    }
    thread();
    unsafe { rp::rprealloc(p, size) }
}
#[inline(always)]
pub(crate) unsafe fn free(p: *mut c_void) {
    if (p as usize).is_multiple_of(SPAN) {
        return unsafe { big::free(p) };
    }
    thread();
    unsafe { rp::rpfree(p) }
}
#[inline(always)]
pub(crate) unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    if size > MAX {
        return core::ptr::null_mut();
    }
    if align >= SPAN {
        return big::alloc(align, size);
    }
    thread();
    unsafe { rp::rpmemalign(align, size) }
}
#[inline(always)]
pub(crate) unsafe fn usable_size(p: *mut c_void) -> usize {
    if (p as usize).is_multiple_of(SPAN) {
        return unsafe { big::usable_size(p) };
    }
    unsafe { rp::rpmalloc_usable_size(p) }
}

/// rpmalloc has no size-class query: the usable size of a block of `size` bytes, asked of a
/// block made and freed for the question (rpmalloc rounds every request to its class, so
/// the answer does not depend on the heap's state).
pub(crate) fn size_class(size: usize) -> usize {
    unsafe {
        let p = malloc(size.max(1));
        if p.is_null() {
            return size;
        }
        let n = usable_size(p);
        free(p);
        n
    }
}

/// rpmalloc has no version call; this is the version its sources carry (`rpmalloc-sys`
/// 0.2.3 bundles upstream commit b097fd0, whose CHANGELOG's latest release is 1.4.3).
pub(crate) fn version() -> &'static str {
    "1.4.3+b097fd0"
}

/// rpmalloc's global statistics (built with ENABLE_STATISTICS): mapped, mapped peak,
/// cached, huge, total mapped, total unmapped, in bytes.
pub(crate) fn global() -> rp::rpmalloc_global_statistics_t {
    let mut s: rp::rpmalloc_global_statistics_t = unsafe { core::mem::zeroed() };
    unsafe { rp::rpmalloc_global_statistics(&mut s) };
    s
}

/// Blocks aligned to a span or more, each in a mapping of its own, with its base and length
/// in the two words before it.
mod big {
    use core::ffi::c_void;

    pub(super) fn alloc(align: usize, size: usize) -> *mut c_void {
        let page = 4096usize;
        let Some(len) = size.checked_add(align).and_then(|n| n.checked_add(page)) else {
            return core::ptr::null_mut();
        };
        let len = len.next_multiple_of(page);
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return core::ptr::null_mut();
        }
        let q = (base as usize + page).next_multiple_of(align);
        unsafe {
            let h = (q as *mut usize).sub(2);
            *h = base as usize;
            *h.add(1) = len;
        }
        q as *mut c_void
    }

    unsafe fn header(p: *mut c_void) -> (usize, usize) {
        let h = unsafe { (p as *const usize).sub(2) };
        unsafe { (*h, *h.add(1)) }
    }

    pub(super) unsafe fn free(p: *mut c_void) {
        let (base, len) = unsafe { header(p) };
        unsafe { libc::munmap(base as *mut c_void, len) };
    }

    pub(super) unsafe fn usable_size(p: *mut c_void) -> usize {
        let (base, len) = unsafe { header(p) };
        base + len - p as usize
    }

    pub(super) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
        let old = unsafe { usable_size(p) };
        if size <= old {
            return p;
        }
        let q = unsafe { super::malloc(size) };
        if !q.is_null() {
            unsafe {
                core::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, old);
                free(p);
            }
        }
        q
    }
}
