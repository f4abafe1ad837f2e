//! glibc's allocator, reached through its `__libc_*` entry points so that the shim's own
//! exported `malloc` family is never called back.
use core::ffi::c_void;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

unsafe extern "C" {
    #[link_name = "__libc_malloc"]
    fn libc_malloc(size: usize) -> *mut c_void;
    #[link_name = "__libc_calloc"]
    fn libc_calloc(n: usize, size: usize) -> *mut c_void;
    #[link_name = "__libc_realloc"]
    fn libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    #[link_name = "__libc_free"]
    fn libc_free(p: *mut c_void);
    #[link_name = "__libc_memalign"]
    fn libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn gnu_get_libc_version() -> *const core::ffi::c_char;
}

/// glibc exports no `__libc_malloc_usable_size`; the real one is found once with
/// dlsym(RTLD_NEXT) (the shim's own `malloc_usable_size` comes first in the lookup order).
static USABLE: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn init() {
    if USABLE.load(Relaxed) == 0 {
        let f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"malloc_usable_size".as_ptr()) };
        let f = if f.is_null() {
            unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"malloc_usable_size".as_ptr()) }
        } else {
            f
        };
        USABLE.store(f as usize, Relaxed);
    }
}

#[inline(always)]
pub(crate) unsafe fn malloc(size: usize) -> *mut c_void {
    unsafe { libc_malloc(size) }
}
#[inline(always)]
pub(crate) unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
    unsafe { libc_calloc(n, size) }
}
#[inline(always)]
pub(crate) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    unsafe { libc_realloc(p, size) }
}
#[inline(always)]
pub(crate) unsafe fn free(p: *mut c_void) {
    unsafe { libc_free(p) }
}
#[inline(always)]
pub(crate) unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    unsafe { libc_memalign(align, size) }
}
#[inline]
pub(crate) unsafe fn usable_size(p: *mut c_void) -> usize {
    let mut f = USABLE.load(Relaxed);
    if f == 0 {
        init();
        f = USABLE.load(Relaxed);
    }
    if f == 0 {
        return unsafe { header_usable_size(p) };
    }
    let f: unsafe extern "C" fn(*mut c_void) -> usize = unsafe { core::mem::transmute(f) };
    unsafe { f(p) }
}

/// glibc 2.36's `musable` read from the chunk header, for when dlsym found nothing.
unsafe fn header_usable_size(p: *mut c_void) -> usize {
    let size = unsafe { *(p as *const usize).sub(1) };
    let chunk = size & !7;
    if size & 2 != 0 { chunk - 16 } else { chunk - 8 }
}

/// glibc's chunk rounding (malloc.c `request2size`, `musable`): a heap chunk is the request
/// plus one size word, rounded up to 16 bytes, at least 32; requests from the default mmap
/// threshold (128 KiB) up get their own mapping, rounded up to pages, with a two-word
/// header. Asking glibc by allocating would not do: a block can come from a free chunk a
/// little larger than the rounding, so the answer would depend on the asker's heap.
pub(crate) fn size_class(size: usize) -> usize {
    const SIZE_SZ: usize = 8;
    const MMAP_THRESHOLD: usize = 128 * 1024;
    let chunk = ((size + SIZE_SZ + 15) & !15).max(32);
    if size >= MMAP_THRESHOLD {
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        return (chunk + SIZE_SZ).next_multiple_of(page) - 2 * SIZE_SZ;
    }
    chunk - SIZE_SZ
}

pub(crate) fn version() -> &'static str {
    unsafe {
        let v = gnu_get_libc_version();
        if v.is_null() {
            return "unknown";
        }
        core::ffi::CStr::from_ptr(v).to_str().unwrap_or("unknown")
    }
}
