//! The C ABI: every exported symbol of libshim.so, with the argument rules C and glibc give
//! them. Each checks its arguments, then forwards to the backend through `hot`, which
//! records the call.
#![allow(clippy::missing_safety_doc)]
use crate::hot;
use core::ffi::c_void;
use recorder::buffer::Args;
use recorder::Op;
use shim_backend as be;

const PTR: usize = core::mem::size_of::<*const ()>();

#[inline(always)]
pub(crate) fn set_errno(e: i32) {
    unsafe { *libc::__errno_location() = e };
}

fn page_size() -> usize {
    crate::shared::page_size()
}

/// glibc's memalign rules: absurd alignments fail with EINVAL, others round up to a power
/// of two. Alignments up to 8 are plain malloc (every backend aligns that far); 16 and
/// more go to the backend's aligned call, since jemalloc and mimalloc align small blocks
/// to 8 only. errno is ENOMEM on failure and untouched on success (mimalloc can set EINVAL
/// on a large alignment it then serves).
#[inline(always)]
unsafe fn memalign_rules(align: usize, size: usize) -> *mut c_void {
    if align > usize::MAX / 2 + 1 {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    }
    unsafe { aligned(align.next_power_of_two(), size) }
}

/// An allocation aligned to `align` (a power of two), with C's errno rules.
#[inline(always)]
pub(crate) unsafe fn aligned(align: usize, size: usize) -> *mut c_void {
    let saved = unsafe { *libc::__errno_location() };
    let p = unsafe { if align <= PTR { be::malloc(size) } else { be::memalign(align, size) } };
    set_errno(if p.is_null() { libc::ENOMEM } else { saved });
    p
}

#[inline(always)]
pub(crate) fn oom(p: *mut c_void) -> *mut c_void {
    if p.is_null() {
        set_errno(libc::ENOMEM);
    }
    p
}

// malloc and free forward from a frame of their own: the recording path needs six saved
// registers, and without the split every forwarded call would push and pop them.

#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    match crate::state::get() {
        crate::state::OFF => return unsafe { oom(be::malloc(size)) },
        crate::state::WATCHING => return malloc_watched(size),
        crate::state::SAMPLING => return malloc_sampled(size),
        _ => {}
    }
    malloc_recorded(size)
}

/// Watching: only a mark for the watchdog, in a frame of its own (a tail call from malloc,
/// whose forwarding path stays frameless).
#[inline(never)]
fn malloc_watched(size: usize) -> *mut c_void {
    hot::watch(Op::Malloc, || unsafe { oom(be::malloc(size)) })
}

#[inline(never)]
fn malloc_sampled(size: usize) -> *mut c_void {
    crate::sampled::malloc(size, || unsafe { oom(be::malloc(size)) })
}

#[inline(never)]
fn malloc_recorded(size: usize) -> *mut c_void {
    hot::record_alloc(Op::Malloc, Args { size: size as u64, ..Args::default() }, || unsafe {
        oom(be::malloc(size))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    match crate::state::get() {
        crate::state::OFF => return unsafe { be::free(p) },
        crate::state::WATCHING => return free_watched(p),
        crate::state::SAMPLING => return free_sampled(p),
        _ => {}
    }
    free_recorded(p)
}

#[inline(never)]
fn free_watched(p: *mut c_void) {
    hot::watch(Op::Free, || unsafe { be::free(p) })
}

#[inline(never)]
fn free_sampled(p: *mut c_void) {
    crate::sampled::free(p, || unsafe { be::free(p) })
}

#[inline(never)]
fn free_recorded(p: *mut c_void) {
    hot::record_released(Op::Free, Args { ptr: p as u64, ..Args::default() }, || unsafe { be::free(p) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let a = Args { count: n as u64, size: size as u64, ..Args::default() };
    hot::alloc(Op::Calloc, a, || unsafe {
        if n.checked_mul(size).is_none() {
            set_errno(libc::ENOMEM);
            return core::ptr::null_mut();
        }
        oom(be::calloc(n, size))
    })
}

/// realloc as glibc does it: NULL is malloc, size 0 frees and returns NULL.
#[inline(always)]
pub(crate) unsafe fn realloc_rules(p: *mut c_void, size: usize) -> *mut c_void {
    unsafe {
        if p.is_null() {
            oom(be::malloc(size))
        } else if size == 0 {
            be::free(p);
            core::ptr::null_mut()
        } else {
            oom(be::realloc(p, size))
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let a = Args { old: p as u64, size: size as u64, ..Args::default() };
    hot::alloc(Op::Realloc, a, || unsafe { realloc_rules(p, size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    let a = Args { old: p as u64, count: n as u64, size: size as u64, ..Args::default() };
    hot::alloc(Op::Reallocarray, a, || unsafe {
        match n.checked_mul(size) {
            Some(total) => realloc_rules(p, total),
            None => {
                set_errno(libc::ENOMEM);
                core::ptr::null_mut()
            }
        }
    })
}

/// Returns EINVAL for an alignment that is not a power-of-two multiple of sizeof(void*),
/// ENOMEM when out of memory, and leaves errno alone.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    if align == 0 || align % PTR != 0 || !(align / PTR).is_power_of_two() {
        return libc::EINVAL;
    }
    let saved = unsafe { *libc::__errno_location() };
    let a = Args { align: align as u64, size: size as u64, ..Args::default() };
    let p = hot::alloc(Op::PosixMemalign, a, || unsafe { aligned(align, size) });
    set_errno(saved);
    if p.is_null() {
        return libc::ENOMEM;
    }
    unsafe { *out = p };
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    let a = Args { align: align as u64, size: size as u64, ..Args::default() };
    hot::alloc(Op::AlignedAlloc, a, || unsafe { memalign_rules(align, size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    let a = Args { align: align as u64, size: size as u64, ..Args::default() };
    hot::alloc(Op::Memalign, a, || unsafe { memalign_rules(align, size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    let a = Args { size: size as u64, ..Args::default() };
    hot::alloc(Op::Valloc, a, || unsafe { memalign_rules(page_size(), size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let a = Args { size: size as u64, ..Args::default() };
    hot::alloc(Op::Pvalloc, a, || unsafe {
        let ps = page_size();
        match size.checked_add(ps - 1) {
            Some(s) => memalign_rules(ps, (s & !(ps - 1)).max(ps)),
            None => {
                set_errno(libc::ENOMEM);
                core::ptr::null_mut()
            }
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    crate::init::ensure_init_untraced();
    unsafe { be::usable_size(p) }
}

// exec: the new image loads the shim afresh and writes its own log, so this one is flushed
// and closed first. glibc's exec functions call each other internally, out of reach of
// interposition, so each is wrapped; the variadic execl family is in exec.c (it builds an
// argv and calls these).

type Argv = *const *const libc::c_char;

/// The next definition of `name` (glibc's), looked up once.
fn real(slot: &core::sync::atomic::AtomicUsize, name: &core::ffi::CStr) -> usize {
    use core::sync::atomic::Ordering::Relaxed;
    let mut f = slot.load(Relaxed);
    if f == 0 {
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        slot.store(f, Relaxed);
    }
    f
}

macro_rules! exec_hook {
    ($name:ident, $cname:literal, ($($a:ident: $t:ty),*)) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> i32 {
            static REAL: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
            let f = real(&REAL, $cname);
            if f == 0 {
                set_errno(libc::ENOSYS);
                return -1;
            }
            let f: unsafe extern "C" fn($($t),*) -> i32 = unsafe { core::mem::transmute(f) };
            let flushed = crate::lifecycle::before_exec();
            let rc = unsafe { f($($a),*) };
            if flushed {
                let e = unsafe { *libc::__errno_location() };
                crate::lifecycle::after_failed_exec();
                set_errno(e);
            }
            rc
        }
    };
}

exec_hook!(execve, c"execve", (path: *const libc::c_char, argv: Argv, envp: Argv));
exec_hook!(execv, c"execv", (path: *const libc::c_char, argv: Argv));
exec_hook!(execvp, c"execvp", (file: *const libc::c_char, argv: Argv));
exec_hook!(execvpe, c"execvpe", (file: *const libc::c_char, argv: Argv, envp: Argv));
exec_hook!(fexecve, c"fexecve", (fd: i32, argv: Argv, envp: Argv));

// _exit and _Exit run no atexit handler: flush first (dash, for one, ends with _exit).

#[unsafe(no_mangle)]
pub unsafe extern "C" fn _exit(status: i32) -> ! {
    crate::lifecycle::before_exit(status);
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    loop {}
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Exit(status: i32) -> ! {
    crate::lifecycle::before_exit(status);
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    loop {}
}

// abort(): noted in the in-flight file (recovery then says the process aborted), then the
// C library's abort, unchanged. glibc's own calls to abort (assert, heap corruption checks)
// do not come here: their logs say "killed".

static REAL_ABORT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Looks the C library's abort up, from the constructor (dlsym may allocate: not in abort).
pub fn resolve_abort() {
    real(&REAL_ABORT, c"abort");
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn abort() -> ! {
    crate::lifecycle::on_abort();
    let f = REAL_ABORT.load(core::sync::atomic::Ordering::Relaxed);
    if f != 0 {
        let f: unsafe extern "C" fn() -> ! = unsafe { core::mem::transmute(f) };
        unsafe { f() }
    }
    unsafe {
        libc::raise(libc::SIGABRT);
        libc::signal(libc::SIGABRT, libc::SIG_DFL);
        libc::raise(libc::SIGABRT);
        libc::syscall(libc::SYS_exit_group, 127);
    }
    loop {}
}

#[cfg(target_arch = "x86_64")]
mod variadic_exec {
    // Stable Rust cannot define a variadic function; these exported trampolines jump to the
    // C definitions in exec.c with every argument register and the stack untouched.
    unsafe extern "C" {
        fn shim_execl();
        fn shim_execlp();
        fn shim_execle();
    }
    macro_rules! trampoline {
        ($name:ident, $target:ident) => {
            #[unsafe(no_mangle)]
            #[unsafe(naked)]
            pub unsafe extern "C" fn $name() {
                core::arch::naked_asm!("jmp {}", sym $target)
            }
        };
    }
    trampoline!(execl, shim_execl);
    trampoline!(execlp, shim_execlp);
    trampoline!(execle, shim_execle);
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
