//! Firefox's mozjemalloc switched to the serving backend: what its statistics calls answer.
//! mozjemalloc keeps the blocks it made before the switch (and serves nothing after it), so
//! its own figures describe those; the serving backend's are added to them, which is what the
//! program holds in all. Only `jemalloc_stats_lite_t`, whose layout every version shares
//! (`size_t allocated_bytes; uint64_t num_operations;`), is written to; the larger
//! `jemalloc_stats_t` changes between versions and is left to mozjemalloc (see
//! shim/src/patch/entries.rs).
use super::snapshot;
use crate::Backend;
use core::ffi::c_void;

/// After mozjemalloc filled `out` (a `jemalloc_stats_lite_t`): the backend's allocated bytes
/// added to its own.
///
/// # Safety
/// `out` is NULL or points to a `jemalloc_stats_lite_t` mozjemalloc just filled.
pub unsafe fn add_to_stats_lite(b: Backend, out: *mut c_void) {
    if out.is_null() {
        return;
    }
    let allocated = out as *mut usize;
    unsafe { *allocated = (*allocated).saturating_add(snapshot(b).allocated) };
}

/// `jemalloc_free_dirty_pages()`: the backend gives its free memory back too.
pub fn purge(b: Backend) {
    super::purge(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_lite_adds_the_backends_allocated_bytes() {
        let _serial = super::super::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // mozjemalloc's answer: 1000 bytes of its own, 7 operations.
        let mut lite: [usize; 2] = [1000, 7];
        let p = unsafe { super::super::alloc_in(Backend::Glibc, 1 << 20) };
        assert!(!p.is_null());
        let before = snapshot(Backend::Glibc).allocated;
        unsafe { add_to_stats_lite(Backend::Glibc, lite.as_mut_ptr() as *mut c_void) };
        let after = snapshot(Backend::Glibc).allocated;
        unsafe { super::super::free_in(Backend::Glibc, p) };
        // The backend's figure includes the live MiB; num_operations is left as it was.
        assert!(lite[0] >= 1000 + (1 << 20), "allocated {} after adding", lite[0]);
        assert!(lite[0] >= 1000 + before.min(after) && lite[0] <= 1000 + before.max(after));
        assert_eq!(lite[1], 7);
        unsafe { add_to_stats_lite(Backend::Glibc, core::ptr::null_mut()) };
    }
}
