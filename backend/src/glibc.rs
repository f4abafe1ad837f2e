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

/// glibc exports no `__libc_malloc_usable_size`; the real one is looked up in the C library
/// itself (the shim's own `malloc_usable_size` comes first in the lookup order, and a
/// program's allocator library, Debian's libjemalloc.so.2 for one, can come next).
static USABLE: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn init() {
    for i in 0..FNS.len() {
        entry(i);
    }
    if USABLE.load(Relaxed) == 0 {
        USABLE.store(libc_symbol(c"malloc_usable_size"), Relaxed);
    }
}

unsafe extern "C" {
    fn dladdr1(addr: *const c_void, info: *mut libc::Dl_info, extra: *mut *mut c_void, flags: i32) -> i32;
}
const RTLD_DL_LINKMAP: i32 = 2;

/// The C library's own definition of `name` (0: none), whatever the program or its other
/// libraries define under the same name: dlsym(RTLD_NEXT) finds a program's allocator
/// library first (Debian's libjemalloc.so.2 defines `malloc_usable_size`, gperftools' tcmalloc
/// `__libc_malloc`), and dlvsym accepts their unversioned definitions for glibc's versioned
/// names. So the name is looked up in libc's own dynamic symbol table through its GNU hash
/// table, as the loader would; libc found from an address only it defines. Allocates nothing
/// and takes no lock (dlsym on a handle would need dlopen, which allocates).
pub fn libc_symbol(name: &core::ffi::CStr) -> usize {
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let mut map: *mut c_void = core::ptr::null_mut();
    let here = gnu_get_libc_version as *const c_void;
    if unsafe { dladdr1(here, &mut info, &mut map, RTLD_DL_LINKMAP) } == 0 || map.is_null() {
        return 0;
    }
    // struct link_map's public head: l_addr, l_name, l_ld (the dynamic section).
    let lm = map as *const usize;
    let (base, dynamic) = unsafe { (*lm, *lm.add(2) as *const Dyn) };
    unsafe { gnu_hash_lookup(base, dynamic, name.to_bytes()) }
}

/// Looks `name` up in the dynamic symbol table of the object loaded at `base` whose dynamic
/// section is `dynamic`: its default (or only) definition's address, 0 if none.
#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

unsafe fn gnu_hash_lookup(base: usize, dynamic: *const Dyn, name: &[u8]) -> usize {
    const DT_STRTAB: u64 = 5;
    const DT_SYMTAB: u64 = 6;
    const DT_GNU_HASH: u64 = 0x6fff_fef5;
    const DT_VERSYM: u64 = 0x6fff_fff0;
    let (mut symtab, mut strtab, mut hash, mut versym) = (0usize, 0usize, 0usize, 0usize);
    let mut d = dynamic;
    unsafe {
        while (*d).tag != 0 {
            // The loader has relocated these in place where the section is writable (x86-64):
            // an address below the load base is still an offset.
            let v = (*d).val as usize;
            let v = if v < base { base + v } else { v };
            match (*d).tag as u64 {
                DT_SYMTAB => symtab = v,
                DT_STRTAB => strtab = v,
                DT_GNU_HASH => hash = v,
                DT_VERSYM => versym = v,
                _ => {}
            }
            d = d.add(1);
        }
        if symtab == 0 || strtab == 0 || hash == 0 {
            return 0;
        }
        let h = name.iter().fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32));
        let words = hash as *const u32;
        let (nbuckets, symoffset, bloom_size) = (*words, *words.add(1), *words.add(2));
        if nbuckets == 0 {
            return 0;
        }
        let buckets = words.add(4 + 2 * bloom_size as usize);
        let chain = buckets.add(nbuckets as usize);
        let mut i = *buckets.add((h % nbuckets) as usize);
        if i < symoffset {
            return 0;
        }
        loop {
            let h2 = *chain.add((i - symoffset) as usize);
            if h | 1 == h2 | 1 {
                let sym = &*((symtab as *const libc::Elf64_Sym).add(i as usize));
                let sname =
                    core::ffi::CStr::from_ptr((strtab + sym.st_name as usize) as *const core::ffi::c_char);
                // A hidden (non-default) version is an old ABI's, not the name's definition.
                let hidden = versym != 0 && *(versym as *const u16).add(i as usize) & 0x8000 != 0;
                if sname.to_bytes() == name && sym.st_shndx != 0 && !hidden {
                    return base + sym.st_value as usize;
                }
            }
            if h2 & 1 != 0 {
                return 0;
            }
            i += 1;
        }
    }
}

/// glibc's own entry points, looked up in the C library: a program can define
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
    let f = libc_symbol(names[i]);
    let f = if f != 0 {
        f
    } else {
        [
            libc_malloc as *const () as usize,
            libc_calloc as *const () as usize,
            libc_realloc as *const () as usize,
            libc_free as *const () as usize,
            libc_memalign as *const () as usize,
        ][i]
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
    let f: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void =
        unsafe { core::mem::transmute(entry(REALLOC)) };
    unsafe { f(p, size) }
}
#[inline(always)]
pub(crate) unsafe fn free(p: *mut c_void) {
    let f: unsafe extern "C" fn(*mut c_void) = unsafe { core::mem::transmute(entry(FREE)) };
    unsafe { f(p) }
}
#[inline(always)]
pub(crate) unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    let f: unsafe extern "C" fn(usize, usize) -> *mut c_void =
        unsafe { core::mem::transmute(entry(MEMALIGN)) };
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
    if size & 2 != 0 {
        chunk - 16
    } else {
        chunk - 8
    }
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
