//! glibc's heap-introspection calls (mallinfo, mallinfo2, malloc_trim, malloc_stats),
//! answered by the backend that really serves the program: with jemalloc or mimalloc,
//! glibc's own answers would describe a heap nobody uses.
use crate::Backend;
use core::ffi::c_void;

/// mallinfo2's fields that a backend can fill: total mapped (`arena`), in use
/// (`uordblks`), free but held (`fordblks`), releasable (`keepcost`).
#[derive(Clone, Copy, Debug, Default)]
pub struct HeapInfo {
    pub arena: usize,
    pub in_use: usize,
    pub free: usize,
    pub releasable: usize,
}

/// None for glibc: the caller forwards to glibc's own function.
pub fn heap_info(b: Backend) -> Option<HeapInfo> {
    match b {
        Backend::Glibc | Backend::Own => None,
        Backend::Jemalloc => {
            let s = |k| crate::jemalloc::stat(k).unwrap_or(0) as usize;
            let (allocated, active, mapped, retained) =
                (s(c"stats.allocated"), s(c"stats.active"), s(c"stats.mapped"), s(c"stats.retained"));
            Some(HeapInfo {
                arena: mapped,
                in_use: allocated,
                free: active.saturating_sub(allocated),
                releasable: retained,
            })
        }
        Backend::Mimalloc => {
            let (cc, _, _) = crate::mimalloc::process_info();
            Some(HeapInfo { arena: cc, in_use: cc, free: 0, releasable: 0 })
        }
        Backend::Tcmalloc => {
            let p = |k| crate::stats::tc_property(k).unwrap_or(0) as usize;
            let free = p(c"tcmalloc.pageheap_free_bytes")
                + p(c"tcmalloc.central_cache_free_bytes")
                + p(c"tcmalloc.transfer_cache_free_bytes")
                + p(c"tcmalloc.thread_cache_free_bytes");
            Some(HeapInfo {
                arena: p(c"generic.heap_size"),
                in_use: p(c"generic.current_allocated_bytes"),
                free,
                releasable: p(c"tcmalloc.pageheap_free_bytes"),
            })
        }
        Backend::Snmalloc => {
            let (cur, _) = crate::snmalloc::usage();
            Some(HeapInfo { arena: cur, in_use: cur, free: 0, releasable: 0 })
        }
        Backend::Rpmalloc => {
            let g = crate::rpmalloc::global();
            Some(HeapInfo {
                arena: g.mapped,
                in_use: g.mapped.saturating_sub(g.cached),
                free: g.cached,
                releasable: g.cached,
            })
        }
    }
}

/// Returns free memory to the system; None for glibc (forward). Some(true) if it tried.
pub fn trim(b: Backend) -> Option<bool> {
    match b {
        Backend::Glibc | Backend::Own => None,
        Backend::Jemalloc => {
            // MALLCTL_ARENAS_ALL is 4096 in jemalloc 5.
            let rc = unsafe {
                tikv_jemalloc_sys::mallctl(
                    c"arena.4096.purge".as_ptr(),
                    core::ptr::null_mut(),
                    core::ptr::null_mut(),
                    core::ptr::null_mut(),
                    0,
                )
            };
            Some(rc == 0)
        }
        Backend::Mimalloc => {
            unsafe { libmimalloc_sys::mi_collect(true) };
            Some(true)
        }
        Backend::Tcmalloc => {
            crate::stats::tc_release();
            Some(true)
        }
        // Neither has a call that returns free memory to the system.
        Backend::Snmalloc | Backend::Rpmalloc => Some(false),
    }
}

/// Prints the backend's statistics on stderr; false for glibc (forward).
pub fn print_stats(b: Backend) -> bool {
    match b {
        Backend::Glibc | Backend::Own => false,
        Backend::Jemalloc => {
            unsafe { tikv_jemalloc_sys::malloc_stats_print(None, core::ptr::null_mut(), core::ptr::null()) };
            true
        }
        Backend::Mimalloc => {
            unsafe { libmimalloc_sys::mi_stats_print(core::ptr::null_mut::<c_void>()) };
            true
        }
        Backend::Tcmalloc => crate::stats::tc_print(),
        Backend::Rpmalloc => {
            // ENABLE_STATISTICS build: rpmalloc's own dump (it takes a FILE*).
            unsafe extern "C" {
                static stderr: *mut c_void;
            }
            unsafe { rpmalloc_sys::rpmalloc_dump_statistics(stderr) };
            true
        }
        Backend::Snmalloc => {
            let (cur, peak) = crate::snmalloc::usage();
            let line = format!("snmalloc: {cur} bytes reserved from the OS, {peak} at the peak\n");
            unsafe { libc::write(2, line.as_ptr() as *const c_void, line.len()) };
            true
        }
    }
}
