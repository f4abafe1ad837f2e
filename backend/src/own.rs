//! The program's own allocator library (Debian's `libjemalloc.so.2`, `libtcmalloc_minimal.so`,
//! `libmimalloc.so`, or any shared library that defines `malloc`): the standard names the shim
//! exports come before the library's in the lookup order, so in `own` mode each forwards to
//! the library's definition of the same name, found once with dlsym(RTLD_NEXT) before the
//! first allocation. Each name is resolved as the program would resolve it without the shim:
//! a library that does not define `memalign` gets the C library's, exactly as without the shim.
//! An executable that defines the malloc family comes before the shim in the lookup order: its
//! definitions are found with RTLD_DEFAULT instead ([`ahead_malloc`]).
use core::ffi::c_void;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

const MALLOC: usize = 0;
const CALLOC: usize = 1;
const REALLOC: usize = 2;
const FREE: usize = 3;
const MEMALIGN: usize = 4;
const USABLE: usize = 5;
const NAMES: [&core::ffi::CStr; 6] =
    [c"malloc", c"calloc", c"realloc", c"free", c"memalign", c"malloc_usable_size"];

static FNS: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];

/// Where the next definition of `malloc` after this library is, when it is not the C
/// library's: the address of the program's allocator library's `malloc`. Allocates nothing.
pub fn next_malloc() -> Option<usize> {
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, c"malloc".as_ptr()) } as usize;
    let libc_malloc = crate::glibc::libc_symbol(c"malloc");
    (next != 0 && libc_malloc != 0 && next != libc_malloc).then_some(next)
}

/// The file that holds `addr` (a function of a loaded library), as the loader names it.
pub fn file_of(addr: usize) -> Option<&'static core::ffi::CStr> {
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // The loader's own copy of the name, alive as long as the library stays loaded.
    Some(unsafe { core::ffi::CStr::from_ptr(info.dli_fname) })
}

/// Where the `malloc` that the program's calls reach is, when a definition comes before this
/// library's in the lookup order (the executable defines the malloc family: Firefox's
/// mozjemalloc, a static jemalloc): that definition. libc's own calls (strdup, realpath,
/// getline) allocate there too, so whatever this library's exported names hand out or take
/// back must go there as well. Allocates nothing.
pub fn ahead_malloc() -> Option<usize> {
    let first = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr()) } as usize;
    let libc_malloc = crate::glibc::libc_symbol(c"malloc");
    (first != 0 && first != libc_malloc && !in_this_object(first) && defined_at(first)).then_some(first)
}

/// Whether a defined symbol starts at `addr`. A non-PIE executable that takes malloc's
/// address (Debian's python3) has an undefined `malloc` whose value is its PLT entry (a
/// "canonical PLT" symbol): dlsym and dladdr both find it, yet it defines nothing, and
/// calling it comes back to this library's malloc. The symbol's section tells (SHN_UNDEF).
fn defined_at(addr: usize) -> bool {
    unsafe extern "C" {
        fn dladdr1(addr: *const c_void, info: *mut libc::Dl_info, extra: *mut *mut c_void, flags: i32)
            -> i32;
    }
    const RTLD_DL_SYMENT: i32 = 1;
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let mut sym: *mut c_void = core::ptr::null_mut();
    // SAFETY: dladdr1 fills `info` and points `sym` at the loader's Elf64_Sym (or NULL).
    let found = unsafe { dladdr1(addr as *const c_void, &mut info, &mut sym, RTLD_DL_SYMENT) };
    if found == 0 || sym.is_null() || info.dli_saddr as usize != addr {
        return false;
    }
    // Elf64_Sym: st_name (4), st_info (1), st_other (1), st_shndx (2), ...
    let shndx = unsafe { (sym as *const u8).add(6).cast::<u16>().read_unaligned() };
    shndx != 0
}

/// Whether `addr` is in the object that holds this code (libshim.so).
fn in_this_object(addr: usize) -> bool {
    let base = |a: usize| {
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        if unsafe { libc::dladdr(a as *const c_void, &mut info) } == 0 {
            0
        } else {
            info.dli_fbase as usize
        }
    };
    let here = base(in_this_object as *const () as usize);
    here != 0 && base(addr) == here
}

/// Resolves every forwarded name; false (nothing changed) when the library lacks one of the
/// four the shim cannot do without (malloc, calloc, realloc, free). `ahead`: the definitions
/// that come before this library's (the executable's, see [`ahead_malloc`]), a name it does not
/// define being the next one after this library's (the C library's), as without the shim.
pub(crate) fn init(ahead: bool) -> bool {
    let mut found = [0usize; 6];
    for (i, n) in NAMES.iter().enumerate() {
        let first = if ahead { unsafe { libc::dlsym(libc::RTLD_DEFAULT, n.as_ptr()) as usize } } else { 0 };
        found[i] = if first != 0 && !in_this_object(first) && defined_at(first) {
            first
        } else {
            unsafe { libc::dlsym(libc::RTLD_NEXT, n.as_ptr()) as usize }
        };
    }
    if found[..4].contains(&0) {
        return false;
    }
    for (slot, f) in FNS.iter().zip(found) {
        slot.store(f, Relaxed);
    }
    true
}

/// The library's name for what it is, from its exports (for the log header).
pub(crate) fn version() -> String {
    let f = FNS[MALLOC].load(Relaxed);
    file_of(f).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

macro_rules! call {
    ($i:expr, ($($t:ty),*) -> $r:ty, ($($a:expr),*)) => {{
        let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { core::mem::transmute(FNS[$i].load(Relaxed)) };
        unsafe { f($($a),*) }
    }};
}

#[inline(always)]
pub(crate) unsafe fn malloc(size: usize) -> *mut c_void {
    call!(MALLOC, (usize) -> *mut c_void, (size))
}
#[inline(always)]
pub(crate) unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
    call!(CALLOC, (usize, usize) -> *mut c_void, (n, size))
}
#[inline(always)]
pub(crate) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    call!(REALLOC, (*mut c_void, usize) -> *mut c_void, (p, size))
}
#[inline(always)]
pub(crate) unsafe fn free(p: *mut c_void) {
    call!(FREE, (*mut c_void) -> (), (p))
}
#[inline(always)]
pub(crate) unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    if FNS[MEMALIGN].load(Relaxed) == 0 {
        return core::ptr::null_mut();
    }
    call!(MEMALIGN, (usize, usize) -> *mut c_void, (align, size))
}
#[inline(always)]
pub(crate) unsafe fn usable_size(p: *mut c_void) -> usize {
    if FNS[USABLE].load(Relaxed) == 0 {
        return 0;
    }
    call!(USABLE, (*mut c_void) -> usize, (p))
}

/// The library's size classes are not known to the shim: the request itself.
pub(crate) fn size_class(size: usize) -> usize {
    size
}
