//! gperftools' MallocExtension C API (`MallocExtension_GetNumericProperty`,
//! `MallocExtension_GetStats`, `tc_malloc_stats`, ...) answered by the serving backend: the
//! shim's own tcmalloc when it serves, the other backends' statistics otherwise, in
//! tcmalloc's terms. A property tcmalloc knows but the serving backend has no figure for is
//! answered as tcmalloc answers a name it does not know (0, "not found").
use super::{say_once, snapshot, Buf, Snapshot, Trouble};
use crate::Backend;
use core::ffi::{c_char, c_int, CStr};

/// A property's figure from a snapshot.
type Figure = fn(&Snapshot) -> usize;

/// The numeric properties answered from another backend, and how: every one gperftools 2.10
/// answers (TCMallocImplementation::GetNumericProperty in its src/tcmalloc.cc). Its caches
/// (central, transfer, thread) and its page heap's counters have no counterpart in another
/// backend: 0.
const PROPERTIES: &[(&str, Figure)] = &[
    ("generic.current_allocated_bytes", |s| s.allocated),
    ("generic.heap_size", |s| s.mapped + s.retained),
    ("generic.total_physical_bytes", |s| s.resident + s.metadata),
    ("tcmalloc.slack_bytes", |s| s.dirty + s.retained),
    ("tcmalloc.central_cache_free_bytes", |_| 0),
    ("tcmalloc.transfer_cache_free_bytes", |_| 0),
    ("tcmalloc.thread_cache_free_bytes", |_| 0),
    ("tcmalloc.pageheap_free_bytes", |s| s.dirty),
    ("tcmalloc.pageheap_unmapped_bytes", |s| s.retained),
    ("tcmalloc.pageheap_committed_bytes", |s| s.mapped),
    ("tcmalloc.pageheap_scavenge_count", |_| 0),
    ("tcmalloc.pageheap_commit_count", |_| 0),
    ("tcmalloc.pageheap_total_commit_bytes", |_| 0),
    ("tcmalloc.pageheap_decommit_count", |_| 0),
    ("tcmalloc.pageheap_total_decommit_bytes", |_| 0),
    ("tcmalloc.pageheap_reserve_count", |_| 0),
    ("tcmalloc.pageheap_total_reserve_bytes", |_| 0),
    // gperftools' default (kDefaultOverallThreadCacheSize): the limit it would keep.
    ("tcmalloc.max_total_thread_cache_bytes", |_| 32 << 20),
    ("tcmalloc.current_total_thread_cache_bytes", |_| 0),
    ("tcmalloc.aggressive_memory_decommit", |_| 0),
    // No limit.
    ("tcmalloc.heap_limit_mb", |_| 0),
];

/// A numeric property of backend `b`, None where it has none.
pub fn property(b: Backend, name: &CStr) -> Option<usize> {
    if b == Backend::Tcmalloc {
        return crate::stats::tc_property(name).map(|v| v as usize);
    }
    let name = name.to_bytes();
    let (_, f) = PROPERTIES.iter().find(|(n, _)| n.as_bytes() == name)?;
    Some(f(&snapshot(b)))
}

/// `MallocExtension_GetNumericProperty(name, value)`: 1 and `*value`, or 0.
///
/// # Safety
/// `name` NULL or a C string, `value` NULL or writable.
pub unsafe fn get_numeric_property(b: Backend, name: *const c_char, value: *mut usize) -> c_int {
    if name.is_null() || value.is_null() {
        return 0;
    }
    let name = unsafe { CStr::from_ptr(name) };
    match property(b, name) {
        Some(v) => {
            unsafe { *value = v };
            1
        }
        None => {
            if b != Backend::Tcmalloc {
                say_once("MallocExtension_GetNumericProperty", name.to_bytes(), Trouble::UnknownName, b);
            }
            0
        }
    }
}

/// `MallocExtension_SetNumericProperty(name, value)`: the shim's tcmalloc takes it; another
/// backend cannot, and answers 0 as tcmalloc does for a property it cannot set.
///
/// # Safety
/// `name` NULL or a C string.
pub unsafe fn set_numeric_property(b: Backend, name: *const c_char, value: usize) -> c_int {
    if name.is_null() {
        return 0;
    }
    let name = unsafe { CStr::from_ptr(name) };
    if b == Backend::Tcmalloc {
        return crate::stats::tc_set_property(name, value) as c_int;
    }
    say_once("MallocExtension_SetNumericProperty", name.to_bytes(), Trouble::CannotHonour, b);
    0
}

/// tcmalloc's statistics text (`MallocExtension_GetStats`) into `buf`, NUL-terminated.
pub fn stats_text(b: Backend, buf: &mut [u8]) {
    if b == Backend::Tcmalloc {
        return crate::stats::tc_stats_text(buf);
    }
    if buf.is_empty() {
        return;
    }
    let mut w = Buf::<2048>::new();
    write_stats(b, &snapshot(b), &mut w);
    let n = w.as_bytes().len().min(buf.len() - 1);
    buf[..n].copy_from_slice(&w.as_bytes()[..n]);
    buf[n] = 0;
}

/// tcmalloc's summary lines, from another backend's figures.
fn write_stats(b: Backend, s: &Snapshot, w: &mut impl core::fmt::Write) {
    let mib = |v: usize| v as f64 / 1048576.0;
    let line = "------------------------------------------------\n";
    let _ =
        writeln!(w, "{line}MALLOC: emulated by the shim: {} serves this program's tcmalloc calls", b.name());
    for (v, what, op) in [
        (s.allocated, "Bytes in use by application", " "),
        (s.dirty, "Bytes in page heap freelist", "+"),
        (s.mapped.saturating_sub(s.allocated + s.dirty), "Bytes in other caches", "+"),
        (s.retained, "Bytes released to OS (aka unmapped)", "+"),
    ] {
        let _ = writeln!(w, "MALLOC: {op} {v:12} ({:7.1} MiB) {what}", mib(v));
    }
    let heap = s.mapped + s.retained;
    let _ = write!(
        w,
        "MALLOC:   ------------\nMALLOC: = {heap:12} ({:7.1} MiB) Actual memory used (physical + swap)\n",
        mib(heap)
    );
    let _ = write!(w, "MALLOC:   {:12} ({:7.1} MiB) Bytes of metadata\n{line}", s.metadata, mib(s.metadata));
}

/// `MallocExtension_GetStats(buf, len)`.
///
/// # Safety
/// `buf` NULL or writable for `len` bytes.
pub unsafe fn get_stats(b: Backend, buf: *mut c_char, len: c_int) {
    if buf.is_null() || len <= 0 {
        return;
    }
    let out = unsafe { core::slice::from_raw_parts_mut(buf as *mut u8, len as usize) };
    stats_text(b, out);
}

/// `tc_malloc_stats()`: the statistics text on stderr.
pub fn malloc_stats(b: Backend) {
    let mut buf = [0u8; 8192];
    stats_text(b, &mut buf);
    let n = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    unsafe { libc::write(2, buf.as_ptr() as *const libc::c_void, n) };
}

/// `MallocExtension_ReleaseFreeMemory()`, `MallocExtension_ReleaseToSystem(n)`.
pub fn release_free_memory(b: Backend) {
    super::purge(b);
}

/// `MallocExtension_MarkThreadIdle()`.
pub fn mark_thread_idle(b: Backend) {
    super::flush_thread_cache(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_move_with_the_heap() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        for b in [Backend::Glibc, Backend::Mimalloc, Backend::Rpmalloc] {
            let get = |n: &CStr| {
                let mut v = 0usize;
                assert_eq!(unsafe { get_numeric_property(b, n.as_ptr(), &mut v) }, 1, "{n:?} on {b:?}");
                v
            };
            let before = get(c"generic.current_allocated_bytes");
            let p = unsafe { super::super::alloc_in(b, 48 << 20) };
            unsafe { core::ptr::write_bytes(p as *mut u8, 1, 48 << 20) };
            let during = get(c"generic.current_allocated_bytes");
            assert!(during >= before + (40 << 20), "{b:?}: {before} then {during}");
            assert!(get(c"generic.heap_size") >= during);
            unsafe { super::super::free_in(b, p) };
            release_free_memory(b);
            let after = get(c"generic.current_allocated_bytes");
            assert!(after + (40 << 20) <= during, "{b:?}: {during} then {after}");
            let mut v = 7usize;
            assert_eq!(unsafe { get_numeric_property(b, c"tcmalloc.no_such_thing".as_ptr(), &mut v) }, 0);
            assert_eq!(v, 7);
            assert_eq!(
                unsafe { set_numeric_property(b, c"tcmalloc.max_total_thread_cache_bytes".as_ptr(), 1) },
                0
            );
        }
    }

    #[test]
    fn stats_text_is_tcmallocs_shape() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut buf = [0xffu8; 4096];
        stats_text(Backend::Glibc, &mut buf);
        let n = buf.iter().position(|&c| c == 0).expect("NUL-terminated");
        let text = core::str::from_utf8(&buf[..n]).unwrap();
        assert!(text.contains("Bytes in use by application"), "{text}");
        let mut tiny = [0xffu8; 8];
        stats_text(Backend::Glibc, &mut tiny);
        assert_eq!(tiny[7], 0);
    }
}
