//! The allocators the shim and the replayer forward to.
//!
//! One backend is chosen per process with [`select`], before the first allocation is served,
//! and never changes: a pointer must be freed by the allocator that made it. Every function
//! here is a plain forward with no recording, no locking and no allocation of its own.
//!
//! The primitives are the ones all three allocators share (`malloc`, `calloc`, `realloc`,
//! `free`, `memalign`, `usable_size`); the C rules of `posix_memalign`, `aligned_alloc`,
//! `valloc`, `pvalloc` and `reallocarray` are applied by the caller on top of them.

mod glibc;
pub mod introspect;
mod jemalloc;
pub use jemalloc::api as jemalloc_api;
mod mimalloc;
pub mod stats;

use core::ffi::c_void;
use core::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// An allocator the shim can forward to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Backend {
    Glibc = 0,
    Jemalloc = 1,
    Mimalloc = 2,
}

impl Backend {
    /// Every backend this build has, in the order reports list them.
    pub const ALL: [Backend; 3] = [Backend::Glibc, Backend::Jemalloc, Backend::Mimalloc];
    /// The accepted spellings, for error messages.
    pub const ACCEPTED: &'static str = "glibc, jemalloc, mimalloc";

    pub fn name(self) -> &'static str {
        match self {
            Backend::Glibc => "glibc",
            Backend::Jemalloc => "jemalloc",
            Backend::Mimalloc => "mimalloc",
        }
    }

    /// Parses a backend name (case-insensitive; "system" and "libc" mean glibc).
    pub fn parse(s: &[u8]) -> Option<Backend> {
        let eq = |a: &str| s.eq_ignore_ascii_case(a.as_bytes());
        if eq("glibc") || eq("system") || eq("libc") {
            Some(Backend::Glibc)
        } else if eq("jemalloc") || eq("je") {
            Some(Backend::Jemalloc)
        } else if eq("mimalloc") || eq("mi") {
            Some(Backend::Mimalloc)
        } else {
            None
        }
    }

    /// The version of the allocator built into this binary.
    pub fn version(self) -> String {
        match self {
            Backend::Glibc => glibc::version().to_string(),
            Backend::Jemalloc => jemalloc::version().to_string(),
            Backend::Mimalloc => mimalloc::version(),
        }
    }

    fn from_u8(v: u8) -> Backend {
        match v {
            1 => Backend::Jemalloc,
            2 => Backend::Mimalloc,
            _ => Backend::Glibc,
        }
    }
}

impl core::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Backend::parse(s.as_bytes())
            .ok_or_else(|| format!("unknown backend '{s}' (accepted: {})", Backend::ACCEPTED))
    }
}

static SELECTED: AtomicU8 = AtomicU8::new(0);

/// Chooses the backend of this process. Call once, before the first allocation it serves.
pub fn select(b: Backend) {
    if b == Backend::Glibc {
        glibc::init();
    }
    SELECTED.store(b as u8, Relaxed);
}

/// The backend chosen by [`select`] (glibc until then).
#[inline(always)]
pub fn selected() -> Backend {
    Backend::from_u8(SELECTED.load(Relaxed))
}

macro_rules! dispatch {
    ($f:ident($($a:expr),*)) => {
        match selected() {
            Backend::Glibc => glibc::$f($($a),*),
            Backend::Jemalloc => jemalloc::$f($($a),*),
            Backend::Mimalloc => mimalloc::$f($($a),*),
        }
    };
}

/// # Safety
/// As C `malloc`.
#[inline(always)]
pub unsafe fn malloc(size: usize) -> *mut c_void {
    unsafe { dispatch!(malloc(size)) }
}
/// # Safety
/// As C `calloc`; the caller has checked `n * size` for overflow.
#[inline(always)]
pub unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
    unsafe { dispatch!(calloc(n, size)) }
}
/// # Safety
/// As C `realloc` with a non-null `p` and a non-zero `size`.
#[inline(always)]
pub unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    unsafe { dispatch!(realloc(p, size)) }
}
/// # Safety
/// As C `free` with a non-null `p` from this backend.
#[inline(always)]
pub unsafe fn free(p: *mut c_void) {
    unsafe { dispatch!(free(p)) }
}
/// # Safety
/// `align` is a power of two, at least `size_of::<*const ()>()`.
#[inline(always)]
pub unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    unsafe { dispatch!(memalign(align, size)) }
}
/// # Safety
/// `p` is a live, non-null pointer from this backend.
#[inline(always)]
pub unsafe fn usable_size(p: *mut c_void) -> usize {
    unsafe { dispatch!(usable_size(p)) }
}

/// The usable size a request of `size` bytes gets from backend `b` (its size class), as
/// the allocator itself defines it: jemalloc `nallocx`, mimalloc `mi_good_size`, glibc's
/// chunk rounding.
pub fn size_class(b: Backend, size: usize) -> usize {
    match b {
        Backend::Glibc => glibc::size_class(size),
        Backend::Jemalloc => jemalloc::size_class(size),
        Backend::Mimalloc => mimalloc::size_class(size),
    }
}

/// A `GlobalAlloc` that forwards to the selected backend, untraced. libshim.so and the replay
/// children use it so that their own allocations never reach the hooks.
pub struct BackendAlloc;

unsafe impl core::alloc::GlobalAlloc for BackendAlloc {
    #[inline]
    unsafe fn alloc(&self, l: core::alloc::Layout) -> *mut u8 {
        unsafe {
            if l.align() <= 16 {
                malloc(l.size()) as *mut u8
            } else {
                memalign(l.align(), l.size()) as *mut u8
            }
        }
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, l: core::alloc::Layout) -> *mut u8 {
        unsafe {
            if l.align() <= 16 {
                calloc(1, l.size()) as *mut u8
            } else {
                let p = memalign(l.align(), l.size()) as *mut u8;
                if !p.is_null() {
                    core::ptr::write_bytes(p, 0, l.size());
                }
                p
            }
        }
    }
    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, _l: core::alloc::Layout) {
        unsafe { free(p as *mut c_void) }
    }
    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: core::alloc::Layout, new: usize) -> *mut u8 {
        unsafe {
            if l.align() <= 16 {
                realloc(p as *mut c_void, new) as *mut u8
            } else {
                let q = memalign(l.align(), new) as *mut u8;
                if !q.is_null() {
                    core::ptr::copy_nonoverlapping(p, q, l.size().min(new));
                    free(p as *mut c_void);
                }
                q
            }
        }
    }
}
