//! gperftools' tcmalloc (not Google's tcmalloc, which builds only with bazel): Debian's
//! static libtcmalloc_minimal.a, copied by build.rs with every C name and operator
//! new/delete it defines renamed `shimtc_*`, so nothing of it interposes the program's.
use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicU8, Ordering::*};

unsafe extern "C" {
    #[link_name = "shimtc_tc_malloc"]
    fn tc_malloc(size: usize) -> *mut c_void;
    #[link_name = "shimtc_tc_calloc"]
    fn tc_calloc(n: usize, size: usize) -> *mut c_void;
    #[link_name = "shimtc_tc_realloc"]
    fn tc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    #[link_name = "shimtc_tc_free"]
    fn tc_free(p: *mut c_void);
    #[link_name = "shimtc_tc_memalign"]
    fn tc_memalign(align: usize, size: usize) -> *mut c_void;
    #[link_name = "shimtc_tc_malloc_size"]
    fn tc_malloc_size(p: *mut c_void) -> usize;
    #[link_name = "shimtc_tc_nallocx"]
    fn tc_nallocx(size: usize, flags: c_int) -> usize;
    #[link_name = "shimtc_tc_version"]
    fn tc_version(major: *mut c_int, minor: *mut c_int, patch: *mut *const c_char) -> *const c_char;
    #[link_name = "shimtc_MallocExtension_GetNumericProperty"]
    fn get_numeric_property(name: *const c_char, value: *mut usize) -> c_int;
    #[link_name = "shimtc_MallocExtension_SetNumericProperty"]
    fn set_numeric_property(name: *const c_char, value: usize) -> c_int;
    #[link_name = "shimtc_MallocExtension_ReleaseFreeMemory"]
    fn release_free_memory();
    #[link_name = "shimtc_MallocExtension_MarkThreadIdle"]
    fn mark_thread_idle_c();
    #[link_name = "shimtc_MallocExtension_GetStats"]
    fn get_stats(buf: *mut c_char, len: c_int);
    /// tcmalloc.cc's static initialiser, deferred by build.rs.
    fn shimtc_static_init();
}

static INIT: AtomicU8 = AtomicU8::new(0);

/// Runs tcmalloc.cc's static initialiser once (its flags, TCMallocGuard), before tcmalloc's
/// first use here: `select`, statistics. Concurrent first callers wait.
pub(crate) fn init() {
    if INIT.load(Acquire) == 2 {
        return;
    }
    if INIT.compare_exchange(0, 1, AcqRel, Acquire).is_ok() {
        unsafe { shimtc_static_init() };
        INIT.store(2, Release);
    } else {
        while INIT.load(Acquire) != 2 {
            core::hint::spin_loop();
        }
    }
}

#[inline(always)]
pub(crate) unsafe fn malloc(size: usize) -> *mut c_void {
    unsafe { tc_malloc(size) }
}
#[inline(always)]
pub(crate) unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
    unsafe { tc_calloc(n, size) }
}
#[inline(always)]
pub(crate) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    unsafe { tc_realloc(p, size) }
}
#[inline(always)]
pub(crate) unsafe fn free(p: *mut c_void) {
    unsafe { tc_free(p) }
}
#[inline(always)]
pub(crate) unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    unsafe { tc_memalign(align, size) }
}
#[inline(always)]
pub(crate) unsafe fn usable_size(p: *mut c_void) -> usize {
    unsafe { tc_malloc_size(p) }
}

/// tcmalloc's own answer (`tc_nallocx`, its size-class rounding).
/// tc_nallocx sets up only what it needs (the size map), not the heap: a reader asking
/// classes (shimlog's slop analysis) pays no more.
pub(crate) fn size_class(size: usize) -> usize {
    let n = unsafe { tc_nallocx(size.max(1), 0) };
    if n == 0 {
        size
    } else {
        n
    }
}

/// "gperftools 2.10": the header and the replay table say whose tcmalloc this is.
pub(crate) fn version() -> &'static str {
    let s = unsafe { tc_version(core::ptr::null_mut(), core::ptr::null_mut(), core::ptr::null_mut()) };
    if s.is_null() {
        return "unknown";
    }
    unsafe { CStr::from_ptr(s) }.to_str().unwrap_or("unknown")
}

/// A MallocExtension numeric property ("generic.current_allocated_bytes", ...).
pub(crate) fn property(name: &CStr) -> Option<u64> {
    init();
    let mut v = 0usize;
    (unsafe { get_numeric_property(name.as_ptr(), &mut v) } != 0).then_some(v as u64)
}

pub(crate) fn set_property(name: &CStr, value: usize) -> bool {
    init();
    unsafe { set_numeric_property(name.as_ptr(), value) != 0 }
}

pub(crate) fn release() {
    init();
    unsafe { release_free_memory() };
}

pub(crate) fn mark_thread_idle() {
    init();
    unsafe { mark_thread_idle_c() };
}

/// MallocExtension's human-readable statistics into `buf` (NUL-terminated).
pub(crate) fn stats_text(buf: &mut [u8]) {
    init();
    if buf.is_empty() {
        return;
    }
    unsafe { get_stats(buf.as_mut_ptr() as *mut c_char, buf.len().min(c_int::MAX as usize) as c_int) };
}

/// MallocExtension's human-readable statistics, written on stderr.
pub(crate) fn print_stats() {
    init();
    let mut buf = [0u8; 16 * 1024];
    unsafe { get_stats(buf.as_mut_ptr() as *mut c_char, buf.len() as c_int) };
    let n = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    unsafe { libc::write(2, buf.as_ptr() as *const c_void, n) };
}

unsafe extern "C" {
    /// gperftools' `FLAGS_tcmalloc_release_rate` (TCMALLOC_RELEASE_RATE, read by its static
    /// initialiser; the page heap reads the flag each time it scavenges).
    #[link_name = "_ZN62FLAG__namespace_do_not_use_directly_use_DECLARE_double_instead27FLAGS_tcmalloc_release_rateE"]
    static mut FLAGS_TCMALLOC_RELEASE_RATE: f64;
}

/// Sets tcmalloc's release rate (as TCMALLOC_RELEASE_RATE would), after its initialiser.
pub(crate) fn set_release_rate(rate: f64) {
    init();
    unsafe { core::ptr::addr_of_mut!(FLAGS_TCMALLOC_RELEASE_RATE).write_volatile(rate) };
}

pub(crate) fn release_rate() -> f64 {
    init();
    unsafe { core::ptr::addr_of!(FLAGS_TCMALLOC_RELEASE_RATE).read_volatile() }
}
