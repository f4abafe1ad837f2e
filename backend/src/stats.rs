//! The allocator's own statistics, where it keeps them (for replay reports).
use crate::Backend;

/// Named counters, in bytes unless the name says otherwise.
pub fn allocator_stats(b: Backend) -> Vec<(&'static str, u64)> {
    match b {
        Backend::Jemalloc => {
            let mut v = Vec::new();
            for (name, key) in [
                ("allocated", c"stats.allocated"),
                ("active", c"stats.active"),
                ("resident", c"stats.resident"),
                ("mapped", c"stats.mapped"),
                ("metadata", c"stats.metadata"),
                ("retained", c"stats.retained"),
            ] {
                if let Some(x) = crate::jemalloc::stat(key) {
                    v.push((name, x));
                }
            }
            v
        }
        Backend::Mimalloc => {
            let (cc, pc, pf) = crate::mimalloc::process_info();
            vec![("current_commit", cc as u64), ("peak_commit", pc as u64), ("page_faults", pf as u64)]
        }
        Backend::Tcmalloc => {
            // gperftools' MallocExtension numeric properties.
            let mut v = Vec::new();
            for (name, key) in [
                ("allocated", c"generic.current_allocated_bytes"),
                ("heap_size", c"generic.heap_size"),
                ("physical", c"generic.total_physical_bytes"),
                ("pageheap_free", c"tcmalloc.pageheap_free_bytes"),
                ("pageheap_unmapped", c"tcmalloc.pageheap_unmapped_bytes"),
                ("central_cache_free", c"tcmalloc.central_cache_free_bytes"),
                ("transfer_cache_free", c"tcmalloc.transfer_cache_free_bytes"),
                ("thread_cache_free", c"tcmalloc.current_total_thread_cache_bytes"),
            ] {
                if let Some(x) = tc_property(key) {
                    v.push((name, x));
                }
            }
            v
        }
        Backend::Snmalloc => {
            let (cur, peak) = crate::snmalloc::usage();
            vec![("reserved", cur as u64), ("peak_reserved", peak as u64)]
        }
        Backend::Rpmalloc => {
            let g = crate::rpmalloc::global();
            vec![
                ("mapped", g.mapped as u64),
                ("mapped_peak", g.mapped_peak as u64),
                ("cached", g.cached as u64),
                ("huge_alloc", g.huge_alloc as u64),
                ("mapped_total", g.mapped_total as u64),
                ("unmapped_total", g.unmapped_total as u64),
            ]
        }
        // The program's own library: its statistics are its own calls' (mallctl...).
        Backend::Own => Vec::new(),
        Backend::Glibc => {
            let m = unsafe { libc::mallinfo2() };
            vec![
                ("arena", m.arena as u64),
                ("mmapped", m.hblkhd as u64),
                ("in_use", m.uordblks as u64),
                ("free", m.fordblks as u64),
                ("releasable", m.keepcost as u64),
            ]
        }
    }
}

/// A gperftools MallocExtension numeric property (None without tcmalloc in this build).
pub(crate) fn tc_property(name: &core::ffi::CStr) -> Option<u64> {
    #[cfg(shim_tcmalloc)]
    return crate::tcmalloc::property(name);
    #[cfg(not(shim_tcmalloc))]
    {
        let _ = name;
        None
    }
}

/// Sets a gperftools MallocExtension numeric property (false without tcmalloc, or when
/// tcmalloc refuses it).
pub(crate) fn tc_set_property(name: &core::ffi::CStr, value: usize) -> bool {
    #[cfg(shim_tcmalloc)]
    return crate::tcmalloc::set_property(name, value);
    #[cfg(not(shim_tcmalloc))]
    {
        let _ = (name, value);
        false
    }
}

/// MallocExtension's statistics text into `buf`, NUL-terminated (empty without tcmalloc).
pub(crate) fn tc_stats_text(buf: &mut [u8]) {
    #[cfg(shim_tcmalloc)]
    crate::tcmalloc::stats_text(buf);
    #[cfg(not(shim_tcmalloc))]
    if let Some(b) = buf.first_mut() {
        *b = 0;
    }
}

/// Releases the calling thread's tcmalloc cache (MallocExtension::MarkThreadIdle).
pub(crate) fn tc_mark_thread_idle() {
    #[cfg(shim_tcmalloc)]
    crate::tcmalloc::mark_thread_idle();
}

pub(crate) fn tc_release() {
    #[cfg(shim_tcmalloc)]
    crate::tcmalloc::release();
}

/// MallocExtension's statistics on stderr; false without tcmalloc in this build.
pub(crate) fn tc_print() -> bool {
    #[cfg(shim_tcmalloc)]
    crate::tcmalloc::print_stats();
    cfg!(shim_tcmalloc)
}
