//! The C ABI of the malloc family: the names LD_PRELOAD reaches (malloc, free, calloc,
//! realloc, reallocarray, the aligned ones), the heap's introspection (malloc_usable_size,
//! mallinfo, malloc_trim, malloc_stats) and munmap's guard. Each allocating or freeing call
//! is one line: its arguments for the record, the one dispatch on the recording state
//! (hot/dispatch.rs), and the call with its C rules (c_rules.rs). exec, _exit and abort
//! are process.rs's.
#![allow(clippy::missing_safety_doc)]
use crate::c_rules as c;
use crate::hot::dispatch;
use core::ffi::c_void;
use recorder::buffer::Args;
use recorder::Op;
use shim_backend as be;

/// The process's start-up, begun by the first call of the malloc family whichever thread
/// makes it (before the constructor, too): hot/entry.rs calls it on a thread's first
/// recorded call, with the thread's `busy` set so that start-up's own allocations pass
/// straight through (the introspection calls below start up untraced, by
/// `init::ensure_init_untraced`).
#[unsafe(no_mangle)]
pub extern "C" fn shim_start_up() {
    crate::init::ensure_init();
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    dispatch::malloc(size, move || unsafe { c::malloc(size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    dispatch::free(p, move || unsafe { be::free(p) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let a = Args { count: n as u64, size: size as u64, ..Args::default() };
    dispatch::alloc(Op::Calloc, a, || unsafe { c::calloc(n, size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let a = Args { old: p as u64, size: size as u64, ..Args::default() };
    dispatch::alloc(Op::Realloc, a, || unsafe { c::realloc(p, size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    let a = Args { old: p as u64, count: n as u64, size: size as u64, ..Args::default() };
    dispatch::alloc(Op::Reallocarray, a, || unsafe { c::reallocarray(p, n, size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    let a = Args { align: align as u64, size: size as u64, ..Args::default() };
    unsafe {
        c::posix_memalign(out, align, || dispatch::alloc(Op::PosixMemalign, a, || c::aligned(align, size)))
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    let a = Args { align: align as u64, size: size as u64, ..Args::default() };
    dispatch::alloc(Op::AlignedAlloc, a, || unsafe { c::memalign(align, size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    let a = Args { align: align as u64, size: size as u64, ..Args::default() };
    dispatch::alloc(Op::Memalign, a, || unsafe { c::memalign(align, size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    let a = Args { size: size as u64, ..Args::default() };
    dispatch::alloc(Op::Valloc, a, || unsafe { c::valloc(size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let a = Args { size: size as u64, ..Args::default() };
    dispatch::alloc(Op::Pvalloc, a, || unsafe { c::pvalloc(size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    crate::init::ensure_init_untraced();
    unsafe { be::usable_size(p) }
}

// Heap introspection: answered by the backend in use (glibc's own functions otherwise
// describe glibc's heap, empty when another backend serves the program).

/// The definition of `name` that describes the heap in use: the program's own allocator
/// library's (or, where it has none, the C library's) when that library serves the program;
/// the C library's own when glibc does, never a library's that happens to come next.
fn heap_owner(slot: &core::sync::atomic::AtomicUsize, name: &core::ffi::CStr) -> usize {
    use core::sync::atomic::Ordering::Relaxed;
    let mut f = slot.load(Relaxed);
    if f == 0 {
        f = if be::selected() == be::Backend::Own {
            unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
        } else {
            be::glibc::libc_symbol(name)
        };
        slot.store(f, Relaxed);
    }
    f
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn mallinfo2() -> libc::mallinfo2 {
    crate::init::ensure_init_untraced();
    match be::introspect::heap_info(be::selected()) {
        Some(h) => {
            let mut m: libc::mallinfo2 = unsafe { core::mem::zeroed() };
            m.arena = h.arena;
            m.uordblks = h.in_use;
            m.fordblks = h.free;
            m.keepcost = h.releasable;
            m
        }
        None => {
            static REAL: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
            let f = heap_owner(&REAL, c"mallinfo2");
            if f == 0 {
                return unsafe { core::mem::zeroed() };
            }
            let f: unsafe extern "C" fn() -> libc::mallinfo2 = unsafe { core::mem::transmute(f) };
            unsafe { f() }
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn mallinfo() -> libc::mallinfo {
    crate::init::ensure_init_untraced();
    match be::introspect::heap_info(be::selected()) {
        Some(h) => {
            let c = |v: usize| v.min(i32::MAX as usize) as i32;
            let mut m: libc::mallinfo = unsafe { core::mem::zeroed() };
            m.arena = c(h.arena);
            m.uordblks = c(h.in_use);
            m.fordblks = c(h.free);
            m.keepcost = c(h.releasable);
            m
        }
        None => {
            static REAL: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
            let f = heap_owner(&REAL, c"mallinfo");
            if f == 0 {
                return unsafe { core::mem::zeroed() };
            }
            let f: unsafe extern "C" fn() -> libc::mallinfo = unsafe { core::mem::transmute(f) };
            unsafe { f() }
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_trim(pad: usize) -> i32 {
    crate::init::ensure_init_untraced();
    match be::introspect::trim(be::selected()) {
        Some(done) => done as i32,
        None => {
            static REAL: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
            let f = heap_owner(&REAL, c"malloc_trim");
            if f == 0 {
                return 0;
            }
            let f: unsafe extern "C" fn(usize) -> i32 = unsafe { core::mem::transmute(f) };
            unsafe { f(pad) }
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_stats() {
    crate::init::ensure_init_untraced();
    if !be::introspect::print_stats(be::selected()) {
        static REAL: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
        let f = heap_owner(&REAL, c"malloc_stats");
        if f != 0 {
            let f: unsafe extern "C" fn() = unsafe { core::mem::transmute(f) };
            unsafe { f() }
        }
    }
}

// munmap: when a program's own allocator is switched to a backend, the memory its blocks
// were in stays reserved when unmapped (patch/owner.rs), so that no block of the backend
// can appear where an old block was. Otherwise a plain munmap.

#[unsafe(no_mangle)]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: usize) -> i32 {
    crate::patch::owner::guarded_munmap(addr, len)
}
