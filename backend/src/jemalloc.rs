//! jemalloc, built into this binary with its `_rjem_` prefix so that nothing collides with
//! the program's own symbols. It reads `_RJEM_MALLOC_CONF`; [`crate::select`]'s caller copies
//! `MALLOC_CONF` there before the first allocation (see the shim's config).
use core::ffi::c_void;
use tikv_jemalloc_sys as je;

unsafe extern "C" {
    #[link_name = "_rjem_memalign"]
    fn je_memalign(align: usize, size: usize) -> *mut c_void;
}

#[inline(always)]
pub(crate) unsafe fn malloc(size: usize) -> *mut c_void {
    unsafe { je::malloc(size) }
}
#[inline(always)]
pub(crate) unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
    unsafe { je::calloc(n, size) }
}
#[inline(always)]
pub(crate) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    unsafe { je::realloc(p, size) }
}
#[inline(always)]
pub(crate) unsafe fn free(p: *mut c_void) {
    unsafe { je::free(p) }
}
#[inline(always)]
pub(crate) unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    unsafe { je_memalign(align, size) }
}
#[inline(always)]
pub(crate) unsafe fn usable_size(p: *mut c_void) -> usize {
    unsafe { je::malloc_usable_size(p) }
}

pub(crate) fn size_class(size: usize) -> usize {
    if size == 0 {
        return unsafe { je::nallocx(1, 0) };
    }
    let n = unsafe { je::nallocx(size, 0) };
    if n == 0 {
        size
    } else {
        n
    }
}

pub(crate) fn version() -> &'static str {
    let mut v: *const core::ffi::c_char = core::ptr::null();
    let mut len = core::mem::size_of::<*const core::ffi::c_char>();
    let rc = unsafe {
        je::mallctl(c"version".as_ptr(), &mut v as *mut _ as *mut c_void, &mut len, core::ptr::null_mut(), 0)
    };
    if rc != 0 || v.is_null() {
        return "unknown";
    }
    let s = unsafe { core::ffi::CStr::from_ptr(v) }.to_str().unwrap_or("unknown");
    // "5.3.1-0-g81034ce..." -> "5.3.1"
    s.split('-').next().unwrap_or(s)
}

/// Reads a `size_t` statistic after refreshing jemalloc's epoch.
pub(crate) fn stat(name: &core::ffi::CStr) -> Option<u64> {
    unsafe {
        let mut epoch: u64 = 1;
        let mut elen = core::mem::size_of::<u64>();
        je::mallctl(
            c"epoch".as_ptr(),
            &mut epoch as *mut _ as *mut c_void,
            &mut elen,
            &mut epoch as *mut _ as *mut c_void,
            elen,
        );
        let mut v: usize = 0;
        let mut len = core::mem::size_of::<usize>();
        let rc =
            je::mallctl(name.as_ptr(), &mut v as *mut _ as *mut c_void, &mut len, core::ptr::null_mut(), 0);
        (rc == 0).then_some(v as u64)
    }
}

/// jemalloc's own API (the shim serves a program's jemalloc entry points with it when the
/// program is switched to this backend).
pub mod api {
    use core::ffi::{c_char, c_int, c_void};
    use tikv_jemalloc_sys as je;

    /// # Safety
    /// As jemalloc's `mallocx`.
    pub unsafe fn mallocx(size: usize, flags: c_int) -> *mut c_void {
        unsafe { je::mallocx(size, flags) }
    }
    /// # Safety
    /// As jemalloc's `rallocx`.
    pub unsafe fn rallocx(p: *mut c_void, size: usize, flags: c_int) -> *mut c_void {
        unsafe { je::rallocx(p, size, flags) }
    }
    /// # Safety
    /// As jemalloc's `xallocx`.
    pub unsafe fn xallocx(p: *mut c_void, size: usize, extra: usize, flags: c_int) -> usize {
        unsafe { je::xallocx(p, size, extra, flags) }
    }
    /// # Safety
    /// As jemalloc's `sallocx`.
    pub unsafe fn sallocx(p: *const c_void, flags: c_int) -> usize {
        unsafe { je::sallocx(p, flags) }
    }
    /// # Safety
    /// As jemalloc's `sdallocx`.
    pub unsafe fn sdallocx(p: *mut c_void, size: usize, flags: c_int) {
        unsafe { je::sdallocx(p, size, flags) }
    }
    /// # Safety
    /// As jemalloc's `dallocx`.
    pub unsafe fn dallocx(p: *mut c_void, flags: c_int) {
        unsafe { je::dallocx(p, flags) }
    }
    pub fn nallocx(size: usize, flags: c_int) -> usize {
        unsafe { je::nallocx(size, flags) }
    }
    /// # Safety
    /// As jemalloc's `mallctl`.
    pub unsafe fn mallctl(
        name: *const c_char,
        oldp: *mut c_void,
        oldlenp: *mut usize,
        newp: *mut c_void,
        newlen: usize,
    ) -> c_int {
        unsafe { je::mallctl(name, oldp, oldlenp, newp, newlen) }
    }
    /// # Safety
    /// As jemalloc's `mallctlnametomib`.
    pub unsafe fn mallctlnametomib(name: *const c_char, mibp: *mut usize, miblenp: *mut usize) -> c_int {
        unsafe { je::mallctlnametomib(name, mibp, miblenp) }
    }
    /// # Safety
    /// As jemalloc's `malloc_stats_print`.
    pub unsafe fn malloc_stats_print(
        write_cb: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
        cbopaque: *mut c_void,
        opts: *const c_char,
    ) {
        unsafe { je::malloc_stats_print(write_cb, cbopaque, opts) }
    }
    /// # Safety
    /// As jemalloc's `mallctlbymib`.
    pub unsafe fn mallctlbymib(
        mib: *const usize,
        miblen: usize,
        oldp: *mut c_void,
        oldlenp: *mut usize,
        newp: *mut c_void,
        newlen: usize,
    ) -> c_int {
        unsafe { je::mallctlbymib(mib, miblen, oldp, oldlenp, newp, newlen) }
    }
}
