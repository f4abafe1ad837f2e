//! glibc's allocator, reached through its `__libc_*` entry points (libc's own, see [`FNS`]) so
//! that the shim's own exported `malloc` family is never called back.
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
/// dlvsym(RTLD_NEXT) at glibc's version (the shim's own `malloc_usable_size` comes first in
/// the lookup order, and a shared allocator the program links, Debian's libjemalloc.so.2,
/// comes before libc with an unversioned one that would be handed glibc's blocks), then
/// dlsym.
static USABLE: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn init() {
    for i in 0..FNS.len() {
        entry(i);
    }
    if USABLE.load(Relaxed) == 0 {
        let f = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"malloc_usable_size".as_ptr(), c"GLIBC_2.2.5".as_ptr()) };
        let f = if f.is_null() { unsafe { libc::dlsym(libc::RTLD_NEXT, c"malloc_usable_size".as_ptr()) } } else { f };
        let f = if f.is_null() {
            unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"malloc_usable_size".as_ptr()) }
        } else {
            f
        };
        USABLE.store(f as usize, Relaxed);
    }
}

/// glibc's own entry points, found with dlsym(RTLD_NEXT): a program can define
/// `__libc_malloc` and the like itself (gperftools' tcmalloc does, to catch glibc's internal
/// calls), and a plain reference would bind to the program's.
static FNS: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];
const MALLOC: usize = 0;
const CALLOC: usize = 1;
const REALLOC: usize = 2;
const FREE: usize = 3;
const MEMALIGN: usize = 4;

#[inline(always)]
fn entry(i: usize) -> usize {
    match FNS[i].load(Relaxed) {
        0 => resolve(i),
        f => f,
    }
}

#[cold]
#[inline(never)]
fn resolve(i: usize) -> usize {
    let names = [c"__libc_malloc", c"__libc_calloc", c"__libc_realloc", c"__libc_free", c"__libc_memalign"];
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, names[i].as_ptr()) } as usize;
    let f = if f != 0 {
        f
    } else {
        [libc_malloc as *const () as usize, libc_calloc as *const () as usize, libc_realloc as *const () as usize,
            libc_free as *const () as usize, libc_memalign as *const () as usize][i]
    };
    FNS[i].store(f, Relaxed);
    f
}

#[inline(always)]
pub(crate) unsafe fn malloc(size: usize) -> *mut c_void {
    let f: unsafe extern "C" fn(usize) -> *mut c_void = unsafe { core::mem::transmute(entry(MALLOC)) };
    unsafe { f(size) }
}
#[inline(always)]
pub(crate) unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
    let f: unsafe extern "C" fn(usize, usize) -> *mut c_void = unsafe { core::mem::transmute(entry(CALLOC)) };
    unsafe { f(n, size) }
}
#[inline(always)]
pub(crate) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let f: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void = unsafe { core::mem::transmute(entry(REALLOC)) };
    unsafe { f(p, size) }
}
#[inline(always)]
pub(crate) unsafe fn free(p: *mut c_void) {
    let f: unsafe extern "C" fn(*mut c_void) = unsafe { core::mem::transmute(entry(FREE)) };
    unsafe { f(p) }
}
#[inline(always)]
pub(crate) unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    let f: unsafe extern "C" fn(usize, usize) -> *mut c_void = unsafe { core::mem::transmute(entry(MEMALIGN)) };
    unsafe { f(align, size) }
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
