//! Another allocator's introspection API answered by the backend that really serves the
//! program: a program whose own jemalloc, tcmalloc or mimalloc was switched to the shim's
//! backend still asks *its* allocator for statistics (`mallctl("stats.allocated")`,
//! `MallocExtension_GetNumericProperty`, `mi_process_info`), and would otherwise read the
//! figures of a heap nobody uses any more, or an error it asserts on.
//!
//! - [`jemalloc`]: the `mallctl` namespace (names, MIBs, jemalloc's calling conventions and
//!   error codes) and `malloc_stats_print`;
//! - [`tcmalloc`]: gperftools' `MallocExtension` numeric properties and statistics text;
//! - [`mimalloc`]: `mi_process_info` and `mi_stats_print_out`;
//! - [`mozjemalloc`]: Firefox's `jemalloc_stats_lite` and `jemalloc_free_dirty_pages`.
//!
//! Each answers from one [`Snapshot`] of the serving backend's own statistics. Nothing here
//! allocates: the names are read in place, text is formatted into stack buffers.
pub mod jemalloc;
pub mod jemalloc_sc;
pub mod mimalloc;
pub mod mozjemalloc;
pub mod tcmalloc;

use crate::Backend;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// The serving backend's statistics in jemalloc's terms, in bytes. What each backend's own
/// counters become is in docs/introspection.md.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Bytes the program holds (jemalloc `stats.allocated`).
    pub allocated: usize,
    /// Bytes in pages that hold the program's blocks (`stats.active`).
    pub active: usize,
    /// The allocator's own bookkeeping (`stats.metadata`).
    pub metadata: usize,
    /// At most this much is resident (`stats.resident`).
    pub resident: usize,
    /// Mapped and usable (`stats.mapped`).
    pub mapped: usize,
    /// Address space kept after its memory went back to the system (`stats.retained`).
    pub retained: usize,
    /// Free but still held, not yet returned (`pdirty`, in bytes here).
    pub dirty: usize,
    /// Returned lazily (MADV_FREE) but still mapped (`pmuzzy`, in bytes here).
    pub muzzy: usize,
}

/// The statistics of backend `b` now.
pub fn snapshot(b: Backend) -> Snapshot {
    match b {
        // The program's own library answers its own statistics: never emulated.
        Backend::Own => Snapshot::default(),
        Backend::Glibc => {
            let m = unsafe { libc::mallinfo2() };
            // uordblks: chunks in use in every arena; hblkhd: mmapped chunks, all in use.
            let allocated = m.uordblks + m.hblkhd;
            let mapped = m.arena + m.hblkhd;
            Snapshot {
                allocated,
                active: allocated,
                resident: mapped,
                mapped,
                dirty: m.fordblks,
                ..Snapshot::default()
            }
        }
        Backend::Jemalloc => {
            let s = |k| crate::jemalloc::stat(k).unwrap_or(0) as usize;
            let page = page_size();
            let pdirty = s(c"stats.arenas.4096.pdirty");
            let pmuzzy = s(c"stats.arenas.4096.pmuzzy");
            Snapshot {
                allocated: s(c"stats.allocated"),
                active: s(c"stats.active"),
                metadata: s(c"stats.metadata"),
                resident: s(c"stats.resident"),
                mapped: s(c"stats.mapped"),
                retained: s(c"stats.retained"),
                dirty: pdirty * page,
                muzzy: pmuzzy * page,
            }
        }
        Backend::Mimalloc => {
            // A release build of mimalloc counts no allocated bytes (that needs MI_STAT) and
            // commits its arenas eagerly, so its committed figure does not follow the
            // program: the process's resident set does (it falls once mimalloc purges the
            // freed pages, after its purge delay or on mi_collect). Committed is what is
            // mapped and usable.
            let (commit, _, _) = crate::mimalloc::process_info();
            let rss = rss_now();
            Snapshot {
                allocated: rss,
                active: rss,
                resident: rss,
                mapped: commit.max(rss),
                ..Snapshot::default()
            }
        }
        Backend::Tcmalloc => {
            let p = |k| crate::stats::tc_property(k).unwrap_or(0) as usize;
            let heap = p(c"generic.heap_size");
            let unmapped = p(c"tcmalloc.pageheap_unmapped_bytes");
            let free = p(c"tcmalloc.pageheap_free_bytes");
            let mapped = heap.saturating_sub(unmapped);
            let physical = p(c"generic.total_physical_bytes");
            Snapshot {
                allocated: p(c"generic.current_allocated_bytes"),
                active: mapped.saturating_sub(free),
                metadata: physical.saturating_sub(mapped),
                resident: physical.max(mapped),
                mapped,
                retained: unmapped,
                dirty: free,
                muzzy: 0,
            }
        }
        Backend::Snmalloc => {
            let (cur, _) = crate::snmalloc::usage();
            Snapshot { allocated: cur, active: cur, resident: cur, mapped: cur, ..Snapshot::default() }
        }
        Backend::Rpmalloc => {
            let g = crate::rpmalloc::global();
            let used = g.mapped.saturating_sub(g.cached);
            Snapshot {
                allocated: used,
                active: used,
                resident: g.mapped,
                mapped: g.mapped,
                dirty: g.cached,
                ..Snapshot::default()
            }
        }
    }
}

/// The page size the figures are counted in (jemalloc's `arenas.page`).
pub fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    match PAGE.load(Relaxed) {
        0 => {
            let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            let p = if p > 0 { p as usize } else { 4096 };
            PAGE.store(p, Relaxed);
            p
        }
        p => p,
    }
}

/// Reads a small /proc file into `buf` (no allocation); what it holds, empty on failure.
pub(crate) fn read_proc<'a>(path: &core::ffi::CStr, buf: &'a mut [u8]) -> &'a [u8] {
    let n = unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return &buf[..0];
        }
        let n = libc::read(fd, buf.as_mut_ptr() as *mut core::ffi::c_void, buf.len());
        libc::close(fd);
        n
    };
    &buf[..n.max(0) as usize]
}

/// The leading decimal digits of `field`.
pub(crate) fn number(field: &[u8]) -> u64 {
    field
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .fold(0u64, |v, &c| v.saturating_mul(10).saturating_add((c - b'0') as u64))
}

/// The process's resident bytes now, from /proc/self/statm ("size resident shared ...", in
/// pages).
pub(crate) fn rss_now() -> usize {
    let mut buf = [0u8; 128];
    let text = read_proc(c"/proc/self/statm", &mut buf);
    number(text.split(|&c| c == b' ').nth(1).unwrap_or(b"0")) as usize * page_size()
}

/// Empties the calling thread's cache of free blocks, where the backend has a call for it.
pub fn flush_thread_cache(b: Backend) {
    match b {
        Backend::Mimalloc => unsafe { libmimalloc_sys::mi_collect(false) },
        Backend::Rpmalloc => crate::rpmalloc::release_thread_caches(),
        Backend::Tcmalloc => crate::stats::tc_mark_thread_idle(),
        Backend::Jemalloc => unsafe {
            tikv_jemalloc_sys::mallctl(
                c"thread.tcache.flush".as_ptr(),
                core::ptr::null_mut(),
                core::ptr::null_mut(),
                core::ptr::null_mut(),
                0,
            );
        },
        // glibc's tcache and snmalloc's thread-local allocator have no such call (and the
        // program's own library is never emulated).
        Backend::Glibc | Backend::Snmalloc | Backend::Own => {}
    }
}

/// Returns free memory to the system (jemalloc's `arena.<i>.purge`).
pub fn purge(b: Backend) {
    match b {
        Backend::Glibc => unsafe {
            libc::malloc_trim(0);
        },
        // Only the calling thread's caches can be given back.
        Backend::Rpmalloc => crate::rpmalloc::release_thread_caches(),
        _ => {
            crate::introspect::trim(b);
        }
    }
}

/// What kind of trouble a call met, for [`say_once`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trouble {
    /// A name the emulation does not know (answered as the real allocator answers an
    /// unknown one).
    UnknownName,
    /// A setting the serving backend cannot take (answered with the real allocator's error
    /// for an operation that failed).
    CannotHonour,
}

/// Serialises the tests that measure a heap or refresh the statistics.
#[cfg(test)]
pub(crate) static TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

const SEEN: usize = 64;
static SEEN_HASHES: [AtomicU64; SEEN] = [const { AtomicU64::new(0) }; SEEN];

/// One line on stderr the first time `api`'s `name` meets `trouble`: at most one per cause
/// (the cause is the API, the name and the trouble), never one per call; after 64 causes
/// nothing more is said. True when it spoke.
pub fn say_once(api: &str, name: &[u8], trouble: Trouble, b: Backend) -> bool {
    // FNV-1a of the cause, never 0 (the empty slot).
    let mut h: u64 = 0xcbf29ce484222325;
    for &c in api.as_bytes().iter().chain(name).chain(&[trouble as u8]) {
        h = (h ^ c as u64).wrapping_mul(0x100000001b3);
    }
    let h = h | 1;
    for slot in &SEEN_HASHES {
        match slot.compare_exchange(0, h, Relaxed, Relaxed) {
            Ok(_) => break,
            Err(v) if v == h => return false,
            Err(_) => {}
        }
        if core::ptr::eq(slot, &SEEN_HASHES[SEEN - 1]) {
            return false;
        }
    }
    let mut w = Buf::<400>::new();
    let name = core::str::from_utf8(&name[..name.len().min(200)]).unwrap_or("(not UTF-8)");
    let _ = match trouble {
        Trouble::UnknownName => core::fmt::write(
            &mut w,
            format_args!("shim: {api}(\"{name}\") has no answer when {} serves the program: answered as an unknown name (said once)\n", b.name()),
        ),
        Trouble::CannotHonour => core::fmt::write(
            &mut w,
            format_args!("shim: {api}(\"{name}\") asks for a setting {} cannot take: answered as a failed operation (said once)\n", b.name()),
        ),
    };
    w.write_to_fd(2);
    true
}

/// A fixed-size text buffer (no allocation); what does not fit is cut off.
pub struct Buf<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Buf<N> {
    pub const fn new() -> Self {
        Buf { bytes: [0; N], len: 0 }
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
    pub fn clear(&mut self) {
        self.len = 0;
    }
    /// The text with a NUL after it (the last byte is given up for it when full).
    pub fn as_c_ptr(&mut self) -> *const core::ffi::c_char {
        let n = self.len.min(N - 1);
        self.bytes[n] = 0;
        self.bytes.as_ptr() as *const core::ffi::c_char
    }
    pub fn write_to_fd(&self, fd: i32) {
        unsafe { libc::write(fd, self.bytes.as_ptr() as *const libc::c_void, self.len) };
    }
}

impl<const N: usize> Default for Buf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> core::fmt::Write for Buf<N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        // Room is kept for a NUL.
        let room = (N - 1).saturating_sub(self.len);
        let n = s.len().min(room);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() {
            Err(core::fmt::Error)
        } else {
            Ok(())
        }
    }
}

/// `n` bytes from backend `b` itself, whichever is selected (tests of several backends in
/// one process).
#[cfg(test)]
pub(crate) unsafe fn alloc_in(b: Backend, n: usize) -> *mut core::ffi::c_void {
    unsafe {
        match b {
            Backend::Glibc => crate::glibc::malloc(n),
            Backend::Jemalloc => crate::jemalloc::malloc(n),
            Backend::Mimalloc => crate::mimalloc::malloc(n),
            Backend::Tcmalloc => crate::tcmalloc::malloc(n),
            Backend::Snmalloc => crate::snmalloc::malloc(n),
            Backend::Rpmalloc => crate::rpmalloc::malloc(n),
            Backend::Own => crate::own::malloc(n),
        }
    }
}

#[cfg(test)]
pub(crate) unsafe fn free_in(b: Backend, p: *mut core::ffi::c_void) {
    unsafe {
        match b {
            Backend::Glibc => crate::glibc::free(p),
            Backend::Jemalloc => crate::jemalloc::free(p),
            Backend::Mimalloc => crate::mimalloc::free(p),
            Backend::Tcmalloc => crate::tcmalloc::free(p),
            Backend::Snmalloc => crate::snmalloc::free(p),
            Backend::Rpmalloc => crate::rpmalloc::free(p),
            Backend::Own => crate::own::free(p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_said_once() {
        let _serial = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        assert!(say_once("test_api", b"a.name", Trouble::UnknownName, Backend::Glibc));
        assert!(!say_once("test_api", b"a.name", Trouble::UnknownName, Backend::Glibc));
        assert!(say_once("test_api", b"a.name", Trouble::CannotHonour, Backend::Glibc));
        assert!(say_once("test_api", b"another", Trouble::UnknownName, Backend::Glibc));
        // A name longer than a line is cut, not a crash.
        let long = [b'x'; 5000];
        assert!(say_once("test_api", &long, Trouble::UnknownName, Backend::Glibc));
    }
}
