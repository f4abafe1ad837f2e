//! The allocators the shim and the replayer forward to.
//!
//! One backend is chosen per process with [`select`], before the first allocation is served,
//! and never changes: a pointer must be freed by the allocator that made it. Every function
//! here is a plain forward with no recording, no locking and no allocation of its own.
//!
//! The primitives are the ones all six allocators share (`malloc`, `calloc`, `realloc`,
//! `free`, `memalign`, `usable_size`); the C rules of `posix_memalign`, `aligned_alloc`,
//! `valloc`, `pvalloc` and `reallocarray` are applied by the caller on top of them.

pub mod emulate;
pub mod glibc;
pub mod introspect;
mod jemalloc;
pub use jemalloc::api as jemalloc_api;
mod mimalloc;
pub mod own;
mod rpmalloc;
pub mod settings;
mod snmalloc;
pub mod stats;
#[cfg(shim_tcmalloc)]
mod tcmalloc;
/// Without Debian's libtcmalloc_minimal.a at build time the tcmalloc backend is absent;
/// these never run (`select` refuses it) but keep `dispatch!` whole.
#[cfg(not(shim_tcmalloc))]
#[allow(dead_code)]
mod tcmalloc {
    pub(crate) use crate::glibc::{calloc, free, malloc, memalign, realloc, size_class, usable_size};
    pub(crate) fn version() -> &'static str {
        "unavailable"
    }
}

use core::ffi::c_void;
use core::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// An allocator the shim can forward to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Backend {
    Glibc = 0,
    Jemalloc = 1,
    Mimalloc = 2,
    /// gperftools' tcmalloc (Debian's libtcmalloc_minimal.a), not Google's.
    Tcmalloc = 3,
    Snmalloc = 4,
    Rpmalloc = 5,
    /// The program's own allocator library (libjemalloc.so, libtcmalloc_minimal.so...),
    /// reached through its standard names: never a choice of its own (not in [`Backend::ALL`],
    /// never parsed), selected with [`select_own`] when the program links one.
    Own = 6,
}

impl Backend {
    /// Every backend this build has, in the order reports list them.
    pub const ALL: [Backend; 6] = [
        Backend::Glibc,
        Backend::Jemalloc,
        Backend::Mimalloc,
        Backend::Tcmalloc,
        Backend::Snmalloc,
        Backend::Rpmalloc,
    ];
    /// The accepted spellings, for error messages (the one list: `shim_config::BACKENDS`).
    pub const ACCEPTED: &'static str = shim_config::BACKENDS_LIST;

    /// Whether this build has the allocator (tcmalloc needs Debian's static library at build
    /// time; the others are built from source).
    pub const fn available(self) -> bool {
        match self {
            Backend::Tcmalloc => cfg!(shim_tcmalloc),
            _ => true,
        }
    }

    /// The backends this build has, in [`Backend::ALL`]'s order.
    pub fn available_all() -> Vec<Backend> {
        Backend::ALL.into_iter().filter(|b| b.available()).collect()
    }

    /// The names of the available backends, comma-separated (for error messages).
    pub const AVAILABLE: &'static str =
        if cfg!(shim_tcmalloc) { shim_config::BACKENDS_LIST } else { shim_config::BACKENDS_LIST_NO_TCMALLOC };

    pub fn name(self) -> &'static str {
        match self {
            Backend::Glibc => "glibc",
            Backend::Jemalloc => "jemalloc",
            Backend::Mimalloc => "mimalloc",
            Backend::Tcmalloc => "tcmalloc",
            Backend::Snmalloc => "snmalloc",
            Backend::Rpmalloc => "rpmalloc",
            Backend::Own => "own",
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
        } else if eq("tcmalloc") || eq("tc") || eq("gperftools") {
            Some(Backend::Tcmalloc)
        } else if eq("snmalloc") || eq("sn") {
            Some(Backend::Snmalloc)
        } else if eq("rpmalloc") || eq("rp") {
            Some(Backend::Rpmalloc)
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
            Backend::Tcmalloc => tcmalloc::version().to_string(),
            Backend::Snmalloc => snmalloc::version().to_string(),
            Backend::Rpmalloc => rpmalloc::version().to_string(),
            Backend::Own => own::version(),
        }
    }

    fn from_u8(v: u8) -> Backend {
        match v {
            1 => Backend::Jemalloc,
            2 => Backend::Mimalloc,
            3 => Backend::Tcmalloc,
            4 => Backend::Snmalloc,
            5 => Backend::Rpmalloc,
            6 => Backend::Own,
            _ => Backend::Glibc,
        }
    }
}

impl core::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match Backend::parse(s.as_bytes()) {
            None => Err(format!("unknown backend '{s}' (accepted: {})", Backend::ACCEPTED)),
            Some(b) if !b.available() => {
                Err(format!("backend '{s}' is not in this build (available: {})", Backend::AVAILABLE))
            }
            Some(b) => Ok(b),
        }
    }
}

static SELECTED: AtomicU8 = AtomicU8::new(0);
/// What serves the shim's own heap ([`BackendAlloc`]): the selected backend, except glibc when
/// the executable's allocator serves the exported names ([`select_executable_own`]).
static PRIVATE: AtomicU8 = AtomicU8::new(0);

/// Chooses the backend of this process. Call once, before the first allocation it serves.
/// A backend this build does not have is not chosen (the caller checks
/// [`Backend::available`] and says so).
pub fn select(b: Backend) {
    let b = if b.available() { b } else { Backend::Glibc };
    match b {
        Backend::Glibc => glibc::init(),
        Backend::Rpmalloc => rpmalloc::init(),
        #[cfg(shim_tcmalloc)]
        Backend::Tcmalloc => tcmalloc::init(),
        _ => {}
    }
    PRIVATE.store(b as u8, Relaxed);
    SELECTED.store(b as u8, Relaxed);
}

/// Chooses the program's own allocator library (see [`own`]) for this process, as [`select`]
/// does a backend. False, with nothing chosen, when the library lacks one of malloc, calloc,
/// realloc or free.
pub fn select_own() -> bool {
    if !own::init(false) {
        return false;
    }
    PRIVATE.store(Backend::Own as u8, Relaxed);
    SELECTED.store(Backend::Own as u8, Relaxed);
    true
}

/// Chooses the allocator the executable defines (see [`own::ahead_malloc`]) for the names the
/// shim exports, as [`select_own`] does a library's; the shim's own heap ([`BackendAlloc`])
/// stays on glibc, out of the program's allocator, which then sees only the program's calls.
/// False, with nothing chosen, when the executable lacks one of malloc, calloc, realloc or
/// free.
pub fn select_executable_own() -> bool {
    if !own::init(true) {
        return false;
    }
    glibc::init();
    PRIVATE.store(Backend::Glibc as u8, Relaxed);
    SELECTED.store(Backend::Own as u8, Relaxed);
    true
}

/// The backend chosen by [`select`] (glibc until then).
#[inline(always)]
pub fn selected() -> Backend {
    Backend::from_u8(SELECTED.load(Relaxed))
}

macro_rules! dispatch {
    ($f:ident($($a:expr),*)) => {
        dispatch!(selected(), $f($($a),*))
    };
    ($which:expr, $f:ident($($a:expr),*)) => {
        match $which {
            Backend::Glibc => glibc::$f($($a),*),
            Backend::Jemalloc => jemalloc::$f($($a),*),
            Backend::Mimalloc => mimalloc::$f($($a),*),
            Backend::Tcmalloc => tcmalloc::$f($($a),*),
            Backend::Snmalloc => snmalloc::$f($($a),*),
            Backend::Rpmalloc => rpmalloc::$f($($a),*),
            Backend::Own => own::$f($($a),*),
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
/// the allocator itself defines it: jemalloc `nallocx`, mimalloc `mi_good_size`, tcmalloc
/// `tc_nallocx`, snmalloc `malloc_good_size`, rpmalloc the usable size of a probing block,
/// glibc's chunk rounding. A backend this build lacks answers `size`.
pub fn size_class(b: Backend, size: usize) -> usize {
    match b {
        Backend::Glibc => glibc::size_class(size),
        Backend::Jemalloc => jemalloc::size_class(size),
        Backend::Mimalloc => mimalloc::size_class(size),
        Backend::Tcmalloc if !b.available() => size,
        Backend::Tcmalloc => tcmalloc::size_class(size),
        Backend::Snmalloc => snmalloc::size_class(size),
        Backend::Rpmalloc => rpmalloc::size_class(size),
        Backend::Own => own::size_class(size),
    }
}

/// The shim's own heap's calls, on [`PRIVATE`].
mod private {
    use super::*;

    #[inline(always)]
    fn which() -> Backend {
        Backend::from_u8(PRIVATE.load(Relaxed))
    }
    #[inline(always)]
    pub(super) unsafe fn malloc(size: usize) -> *mut c_void {
        unsafe { dispatch!(which(), malloc(size)) }
    }
    #[inline(always)]
    pub(super) unsafe fn calloc(n: usize, size: usize) -> *mut c_void {
        unsafe { dispatch!(which(), calloc(n, size)) }
    }
    #[inline(always)]
    pub(super) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
        unsafe { dispatch!(which(), realloc(p, size)) }
    }
    #[inline(always)]
    pub(super) unsafe fn free(p: *mut c_void) {
        unsafe { dispatch!(which(), free(p)) }
    }
    #[inline(always)]
    pub(super) unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
        unsafe { dispatch!(which(), memalign(align, size)) }
    }
}

/// A `GlobalAlloc` that forwards to the selected backend (see [`PRIVATE`]), untraced. libshim.so and the replay
/// children use it so that their own allocations never reach the hooks.
pub struct BackendAlloc;

unsafe impl core::alloc::GlobalAlloc for BackendAlloc {
    #[inline]
    unsafe fn alloc(&self, l: core::alloc::Layout) -> *mut u8 {
        unsafe {
            if l.align() <= 16 {
                private::malloc(l.size()) as *mut u8
            } else {
                private::memalign(l.align(), l.size()) as *mut u8
            }
        }
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, l: core::alloc::Layout) -> *mut u8 {
        unsafe {
            if l.align() <= 16 {
                private::calloc(1, l.size()) as *mut u8
            } else {
                let p = private::memalign(l.align(), l.size()) as *mut u8;
                if !p.is_null() {
                    core::ptr::write_bytes(p, 0, l.size());
                }
                p
            }
        }
    }
    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, _l: core::alloc::Layout) {
        unsafe { private::free(p as *mut c_void) }
    }
    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: core::alloc::Layout, new: usize) -> *mut u8 {
        unsafe {
            if l.align() <= 16 {
                private::realloc(p as *mut c_void, new) as *mut u8
            } else {
                let q = private::memalign(l.align(), new) as *mut u8;
                if !q.is_null() {
                    core::ptr::copy_nonoverlapping(p, q, l.size().min(new));
                    private::free(p as *mut c_void);
                }
                q
            }
        }
    }
}

/// One backend's primitives chosen at compile time (`B` is a [`Backend`] as `u8`), with no
/// dispatch on the way: for the shim's switched entry points when nothing is recorded, whose
/// hook jumps to a copy made for the backend in use.
pub mod direct {
    use super::*;

    macro_rules! direct {
        ($b:ident, $f:ident($($a:expr),*)) => {
            match $b {
                1 => jemalloc::$f($($a),*),
                2 => mimalloc::$f($($a),*),
                3 => tcmalloc::$f($($a),*),
                4 => snmalloc::$f($($a),*),
                5 => rpmalloc::$f($($a),*),
                6 => own::$f($($a),*),
                _ => glibc::$f($($a),*),
            }
        };
    }

    /// # Safety
    /// As C `malloc`.
    #[inline(always)]
    pub unsafe fn malloc<const B: u8>(size: usize) -> *mut c_void {
        unsafe { direct!(B, malloc(size)) }
    }
    /// # Safety
    /// As C `calloc`; the caller has checked `n * size` for overflow.
    #[inline(always)]
    pub unsafe fn calloc<const B: u8>(n: usize, size: usize) -> *mut c_void {
        unsafe { direct!(B, calloc(n, size)) }
    }
    /// # Safety
    /// As C `realloc` with a non-null `p` and a non-zero `size`.
    #[inline(always)]
    pub unsafe fn realloc<const B: u8>(p: *mut c_void, size: usize) -> *mut c_void {
        unsafe { direct!(B, realloc(p, size)) }
    }
    /// # Safety
    /// As C `free` with a non-null `p` from this backend.
    #[inline(always)]
    pub unsafe fn free<const B: u8>(p: *mut c_void) {
        unsafe { direct!(B, free(p)) }
    }
    /// A free that names the block's size (and jemalloc's flags): jemalloc's `sdallocx`,
    /// which skips the lookup of the size; a plain free for the others.
    ///
    /// # Safety
    /// `p` non-null, from this backend, `size` within its usable size.
    #[inline(always)]
    pub unsafe fn free_sized<const B: u8>(p: *mut c_void, size: usize, flags: i32) {
        unsafe {
            if B == Backend::Jemalloc as u8 {
                tikv_jemalloc_sys::sdallocx(p, size, flags)
            } else {
                direct!(B, free(p))
            }
        }
    }
}
